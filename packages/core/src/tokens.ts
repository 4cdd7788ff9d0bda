/** Injection tokens for composition roots (inversify or any other). Core itself uses no container. */
export const TOKENS = Object.freeze({
  Config: Symbol.for('cos.CoreConfig'),
  Clock: Symbol.for('cos.Clock'),
  Random: Symbol.for('cos.Random'),
  Logger: Symbol.for('cos.Logger'),
  Stores: Symbol.for('cos.Stores'),
  UnitOfWork: Symbol.for('cos.UnitOfWork'),
  HealthProbe: Symbol.for('cos.HealthProbe'),
  RateCounter: Symbol.for('cos.RateCounter'),
  Metrics: Symbol.for('cos.Metrics'),
  Core: Symbol.for('cos.Core'),
});
