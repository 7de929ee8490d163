/** A configuration value that stops start-up; `variable` names it (`JWT_SECRET.key` for a field). */
export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    problem: string,
  ) {
    super(`${variable}: ${problem}`);
    this.name = 'ConfigError';
  }
}
