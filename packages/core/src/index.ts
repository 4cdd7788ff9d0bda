/**
 * @cos/core public surface. Adapters import only from here (and from "@cos/core/testing").
 */
export * from './domain/errors.js';
export * from './domain/rate-window.js';
export * from './domain/organisation.js';
export * from './domain/member.js';
export * from './domain/api-key.js';
export * from './domain/audit.js';
export * from './domain/audit-chain.js';
export * from './domain/audit-verify.js';
export * from './domain/webhook.js';
export * from './domain/webhook-destination.js';
export * from './domain/principal.js';
export { storableText, wellFormedStrings, wellFormedText } from './domain/text.js';
export * from './domain/scopes.js';
export * from './domain/key-policy.js';
export { addressAllowed, cidrsWithin, parseCidr, MAX_ALLOWED_CIDRS, ISSUE_CIDR, type CidrParse } from './domain/key-network.js';
export { networkRefusal, NETWORK_REFUSED_MESSAGE, ISSUE_SOURCE_ADDRESS } from './access/network-check.js';
export * from './domain/usage.js';
export type * from './ports/index.js';
export * from './config.js';
export * from './tokens.js';
export * from './defaults.js';
export * from './views.js';
export * from './version.js';
export * from './core.js';
export { counterKey, freshnessKeys, introspectionCounterKey, keySlot } from './access/counter-keys.js';
export { UndeclaredCredentialChangeError, assertCredentialChangeDeclared } from './access/credential-change.js';
export { InProcessRateCounter } from './access/in-process-counter.js';
export { LogThrottle } from './log-throttle.js';
export { AUTH_FAILURE_REASONS, RATE_LIMIT_OUTCOMES, RATE_LIMIT_SCOPE_KINDS, WEBHOOK_DELIVERY_RESULTS } from './metric-labels.js';
export type { Page } from './operations/page.js';
export type { CoreDeps } from './deps.js';
export { Organisations, type CreateOrganisationOptions, type GetOrganisationOptions } from './operations/organisations.js';
export { Members } from './operations/members.js';
export {
  ApiKeys,
  type IssuedKey,
  type RolledKey,
  type WhoAmI,
  KEY_NOT_FOUND_MESSAGE,
  KEY_REVOKED_ROLL_MESSAGE,
  KEY_EXPIRED_ROLL_MESSAGE,
  ISSUE_ENVIRONMENT_NOT_ALLOWED,
  expiresAtCapIssue,
  type ExpiryCap,
} from './operations/api-keys.js';
export { Usage } from './operations/usage.js';
export { UsageRetention, DEFAULT_USAGE_RETENTION_MS, type UsageRetentionDeps } from './workers/usage-retention.js';
export { ExpiryNotices, type ExpiryNoticesDeps, type ExpiryScan } from './workers/expiry-notices.js';
export { DEFAULT_USAGE_SPAN_MS, MAX_USAGE_SPAN_DAYS } from './validation/usage.js';
export { KeyPolicies, exceedsPolicy } from './operations/key-policies.js';
export { RateLimits, rateLimitOf, type OrganisationRateLimit } from './operations/rate-limits.js';
export { ISSUE_REQUESTS_PER_MINUTE } from './validation/rate-limit.js';
export { ISSUE_MAX_LIFETIME, ISSUE_ALLOWED_ENVIRONMENTS, ISSUE_EXPOSURE_RESPONSE, ISSUE_EXPIRY_NOTICE } from './validation/key-policy.js';
export { KeyUsage, DEFAULT_KEY_USAGE_FLUSH_MS, KEY_USAGE_WARN_INTERVAL_MS, type KeyUsageDeps } from './workers/key-usage.js';
export {
  Admission,
  Authenticator,
  principalOf,
  statusOf,
  KNOWN_INTROSPECTORS_MAX,
  type LookAhead,
  type AdmissionCount,
  type AdmissionParts,
  type AuthenticatorParts,
  type KeyUseRecorder,
  type Inspection,
  type AdmissionResult,
  type Admitted,
  type Refused,
} from './access/admission.js';
export {
  CredentialCache,
  CREDENTIAL_CACHE_MAX_ENTRIES,
  type CountAs,
  type CountPlan,
  type CredentialRead,
  type CredentialCacheLease,
  type CredentialCacheOptions,
} from './access/credential-cache.js';
export type { Bounded } from './access/timeout.js';
export { FENCE_UNAVAILABLE_MESSAGE, FENCE_END_UNANNOUNCED_WARNING, type FenceMode } from './access/credential-fence.js';
export { REGISTRY_PRUNE_AFTER_MS } from './ports/instance-registry.js';
export { clusterNodesOf, clusterRef, redisLocationOf, redisVariable, sameRedis, type RedisLocation } from './access/redis-location.js';
export { identityRefusal, planCommandFence, type FencePlan, type FenceSource } from './access/fence-plan.js';
export {
  DEFAULT_REGISTRATION_TIMINGS,
  InstanceRegistrar,
  REGISTRATION_HEARTBEAT_MS,
  REGISTRATION_LIVE_MS,
  REGISTRATION_TRUST_MS,
  type RegisteredRedis,
  type RegistrationTimings,
} from './access/instance-lease.js';
export { CommandFence, CommandFenceRefusal, type CommandRedis } from './access/command-fence.js';
export { RateLimiter, type RateScope, type OrganisationScope, type KeyScope } from './access/rate-limit.js';
export { TurnBatch, type TurnBatchParts } from './access/turn-batch.js';
export { Introspection, introspectionJson, type ActiveTokenView, type InactiveTokenView, type IntrospectionView } from './access/introspection.js';
export { tokenToLookAhead, MAX_INTROSPECTED_TOKEN_LENGTH, ISSUE_INTROSPECTED_TOKEN, ISSUE_INTROSPECT_COUNT, ISSUE_INTROSPECT_SOURCE_ADDRESS } from './validation/introspect.js';
export { AuditTrail } from './operations/audit-trail.js';
export { Bootstrap, type BootstrapResult } from './operations/bootstrap.js';
export { Health, type HealthReport } from './operations/health.js';
export { activeDescendants, keysCreatedBy, type LineageReads } from './operations/key-lineage.js';
export { SecretScanning, EXPOSURE_ATTEMPTS, EXPOSURE_LINEAGE_CHANGING_MESSAGE, type AlertFeedback, type AlertOutcome, type AlertReport } from './operations/secret-scanning.js';
export { Webhooks, type WebhookChange, type ReencryptReport, WEBHOOK_NOT_FOUND_MESSAGE, DELIVERY_NOT_FOUND_MESSAGE, DEFAULT_OVERLAP_SECONDS, type RotatedSecret } from './operations/webhooks.js';
export { Notifications, NOTIFICATION_NOT_FOUND_MESSAGE, NOTIFICATION_DELIVERED_MESSAGE, PURGE_BATCH, type PurgeReport } from './operations/notifications.js';
export {
  NotificationRetention,
  DEFAULT_NOTIFICATION_RETENTION_MS,
  type NotificationRetentionDeps,
} from './workers/notification-retention.js';
export { IdempotencySweep, DEFAULT_IDEMPOTENCY_SWEEP_INTERVAL_MS, type IdempotencySweepDeps } from './workers/idempotency-sweep.js';
export * from './domain/webhook-secret-cipher.js';
export {
  Idempotency,
  IDEMPOTENCY_LOCK_MS,
  IDEMPOTENCY_TTL_MS,
  requestFingerprint,
  type FinishedResponse,
  type IdempotencyStart,
  type IdempotencyTicket,
  type IdempotentRequest,
} from './operations/idempotency.js';
export { checkIdempotencyKey, IDEMPOTENCY_KEY_FIELD, ISSUE_IDEMPOTENCY_KEY } from './validation/idempotency.js';
export type { Checked } from './validation/issues.js';
export {
  WebhookDelivery,
  DEFAULT_WEBHOOK_DELIVERY,
  DELIVERY_WARN_INTERVAL_MS,
  NO_ENDPOINT_ERROR,
  retryDelayMs,
  leaseMs,
  type DeliveryDeps,
  type WebhookDeliveryOptions,
} from './workers/webhook-delivery.js';
export * from './domain/secret-scanning.js';
export {
  MAX_ALERT_MATCHES,
  ISSUE_ALERT_BODY,
  ISSUE_ALERT_MATCH,
  ISSUE_TOKEN,
  ISSUE_TOKEN_TYPE,
  ISSUE_ALERT_URL,
  ISSUE_ALERT_SOURCE,
  type AlertMatch,
} from './validation/secret-scanning.js';
export { ISSUE_EXPIRING_WITHIN, MAX_EXPIRING_WITHIN_SECONDS } from './validation/key-list-query.js';
export { ISSUE_WEBHOOK_URL, ISSUE_NOTIFICATION_STATUS, MAX_WEBHOOK_URL, webhookDestinationIssue } from './validation/webhook.js';
export { encodeCursor, decodeCursor } from './validation/cursor.js';
// Validation helpers (C-5, C-6, C-8, C-11..C-14, C-23), for adapters that validate on their own.
export {
  ISSUE_EXTRA_FIELD,
  ISSUE_FIELD_REQUIRED,
  ISSUE_NOT_AN_OBJECT,
  ISSUE_CONTROL_CHARACTERS,
  ISSUE_UUID,
  ISSUE_NAME,
  ISSUE_SLUG,
  ISSUE_SECTION,
  ISSUE_LABEL,
  ISSUE_EXPIRES_AT,
  ISSUE_ENVIRONMENT,
  ISSUE_GRACE_PERIOD,
  ISSUE_SCOPES,
  ISSUE_EMAIL,
  ISSUE_LIMIT,
  ISSUE_CURSOR,
  ISSUE_KIND,
  DEFAULT_LIMIT,
  MAX_LIMIT,
  isJsonObject,
  validateCreateOrganisation,
  validateReplaceOrganisation,
  validatePatchOrganisation,
  validateIssueKey,
  validateAddMember,
  validateListQuery,
  validateAuditQuery,
  validateUuid,
  validateSection,
  type CreateOrganisationInput,
  type ReplaceOrganisationInput,
  type PatchOrganisationInput,
  type IssueKeyInput,
  type RollKeyInput,
  type PatchKeyInput,
  type MetadataInput,
  checkPatchKey,
  IMMUTABLE_KEY_FIELDS,
  ISSUE_IMMUTABLE_KEY_FIELD,
  type AddMemberInput,
  type ListQuery,
  type AuditQuery,
} from './validation/index.js';
// Authorisation (spec §5, C-33, C-34): the rule every use case applies first, for adapters that
// must refuse (403) before work of their own such as reading a request body.
export {
  OPERATOR_REQUIRED_MESSAGE,
  OPERATIONS,
  OPERATION_SCOPES,
  authorise,
  authoriseRevocation,
  requireScope,
  hasScope,
  type Operation,
  type OrganisationOperation,
  type PlatformOperation,
  type OperatorOperation,
  type OrganisationArgument,
} from './access/authorise.js';
export { parseAuthorization } from './access/admission.js';
export { scopeKey, COUNTER_TTL_MS, FAIL_OPEN_WARN_INTERVAL_MS } from './access/rate-limit.js';
export { maxActiveKeysMessage } from './operations/api-keys.js';
