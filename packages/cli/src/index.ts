/**
 * @cos/cli for embedders: the composition root (`buildContainer`) and its configuration, so a
 * service can run the whole stack in its own process. The `cos-admin` binary is src/main.ts.
 */
export type { PrometheusMetrics } from './metrics.js';
export type { ScannerKeyFile, ScannerKeyUrl, ScannerKeyUrlOptions } from './scanner-keys.js';
export { bindComponent, buildContainer, closeContainer, coreOf, storeOf, limiterOf, CLI_TOKENS, ServiceContainer, type ContainerOverrides, type ServeComponents, type Token, type Tokens } from './container.js';
export { createStore, createLimiter, createHttpApp, composeCore } from './compose.js';
export type { CorePorts, HttpApp, LimiterHandle, LimiterKind, PortOverrides, StoreKind } from './compose.js';
export { loadConfig, coreConfigOf, ConfigError, CONFIG_TABLE, LOG_LEVELS } from './config.js';
export type { AppConfig, LoadConfigOptions, LogLevel } from './config.js';
export { createLogger, type CosLogger, type CreateLoggerOptions } from './logger.js';
export { routeConsoleTo } from './console.js';
export { listen, SHUTDOWN_GRACE_MS, type ListenOptions, type RunningServer, type StopResult } from './server.js';
export { makeStoreReady } from './runtime.js';
export { serviceVersion } from './version.js';
// The credential fence's instance lease moved into core; the names stay available here too.
export {
  InstanceRegistrar,
  REGISTRATION_HEARTBEAT_MS,
  REGISTRATION_LIVE_MS,
  REGISTRATION_TRUST_MS,
  type RedisLocation,
  type RegisteredRedis,
  type RegistrationTimings,
} from '@cos/core';
