/** Bad input (exit code 2): the message and nothing else. */
export class UsageError extends Error {}

/** A runtime error (exit code 1) with an optional hint line printed after it. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly hint?: string,
  ) {
    super(message);
  }
}

/** The command's stage or scope matched nothing (exit code 3): the message says what. */
export class NothingMatchedError extends Error {}
