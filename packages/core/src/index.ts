/**
 * @cos/core public surface. Adapters import only from here (and from "@cos/core/testing").
 */
export * from './domain/errors.js';
export * from './domain/rate-window.js';
export * from './domain/organisation.js';
export * from './domain/member.js';
export * from './domain/api-key.js';
export * from './domain/audit.js';
export * from './domain/principal.js';
export type * from './ports/index.js';
export * from './config.js';
export * from './tokens.js';
export * from './defaults.js';
export * from './views.js';
export * from './version.js';
export * from './core.js';
export { InProcessRateCounter } from './in-process-counter.js';
export type { Page } from './use-cases/page.js';
export type { CoreDeps } from './use-cases/deps.js';
export { Organisations, type CreateOrganisationOptions } from './use-cases/organisations.js';
export { Members } from './use-cases/members.js';
export { ApiKeys, type IssuedKey } from './use-cases/api-keys.js';
export { Authenticator } from './use-cases/authenticate.js';
export { RateLimiter, type RateScope } from './use-cases/rate-limit.js';
export { AuditTrail } from './use-cases/audit-trail.js';
export { Bootstrap, type BootstrapResult } from './use-cases/bootstrap.js';
export { Health, type HealthReport } from './use-cases/health.js';
export { encodeCursor, decodeCursor } from './validation/cursor.js';
