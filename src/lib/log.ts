/** The structured logger's shape (pino's), as every layer below the surfaces takes it. */
export interface Log {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}
