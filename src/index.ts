export { createDispatchEngine } from './engine';
export type { CancelResult, DispatchEngine } from './engine';
export type { DispatchEngineOptions, FaultPoint } from './options';
export type { EngineEvents, EngineEventName, EngineListener } from './events';
export {
  CAPACITY_OUTCOMES,
  IDEMPOTENT_OUTCOMES,
  DEFERRED_STAGE_TTL_S,
  DEFERRED_IDEMPOTENT_TTL_S,
  isCapacityOutcome,
  isIdempotentOutcome,
  isDeferrableOutcome,
  outcomeClass,
  deferralWindowFor,
  classifyNotSentReasons,
  FAILURE_OUTCOMES,
  CapacityError,
  noCapacity,
  alreadyDone,
  dispatched,
} from './outcomes';
export type { KnownReason, OutcomeOptions } from './outcomes';
export { stageId, parseStageId, MAX_SCOPE_SEGMENTS, MAX_STAGE_ID_LENGTH } from './stage-ref';
export {
  StageDeferralError,
  InvalidStageRefError,
  InvalidOptionsError,
  InvalidJobDataError,
  UnsupportedJobVersionError,
  InvalidJobOptionsError,
  InvalidExecutorResultError,
  DispatchFailedError,
  DeferralLimitError,
  EngineClosedError,
  ReplicationUnconfirmedError,
  InvalidPayloadError,
  InvalidResourceError,
  ClearIncompleteError,
  MissingPermissionError,
  NoExecutorError,
  UnsupportedBullMQError,
  UnsupportedConnectionError,
  isStageDeferralError,
} from './errors';
export type { StageDeferralErrorCode } from './errors';
export type {
  StageRef,
  ExecutorResult,
  Executor,
  DispatchContext,
  DispatchResult,
  DeferralJournalEvent,
  DeferredPage,
  DeferredStage,
  EnqueueResult,
  GateState,
  OutcomeClass,
} from './types';
export type { DispatchJobData } from './job-data';
export { SUPPORTED_BULLMQ } from './bullmq/adapter';
export { instrumentEngine, METRIC_ATTRIBUTES } from './metrics';
