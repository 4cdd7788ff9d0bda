/**
 * An organisation's webhook endpoint, managed by the operator (C-59): set (a new endpoint gets a new
 * signing secret, shown once; changing the URL keeps the secret), show (never the secret), remove,
 * rotate the secret (the new one shown once; deliveries from then on are signed with it). Each
 * change writes its audit entry (the endpoint's origin, never the secret or the URL's path) in the
 * same unit of work. New secrets are stored sealed when an encryption key is configured
 * (WebhookSecretCipher); `reencryptSecrets` moves every stored secret under the current key.
 */
import { ConflictError, NotFoundError } from '../domain/errors.js';
import type { Principal } from '../domain/principal.js';
import {
  ALL_EVENTS,
  fullEndpoint,
  generateWebhookSecret,
  newNotification,
  webhookOrigin,
  type Notification,
  type NotificationStatus,
  type WebhookEndpoint,
} from '../domain/webhook.js';
import { PLAINTEXT_WEBHOOK_SECRETS, WebhookSecretUnreadableError, type WebhookSecretCipher } from '../domain/webhook-secret-cipher.js';
import { auditEntry } from './audit-entry.js';
import { checkUuid } from '../validation/ids.js';
import { all, invalid, isJsonObject, ISSUE_EXTRA_FIELD, ISSUE_FIELD_REQUIRED, valid, type Checked } from '../validation/issues.js';
import { checkListQuery } from '../validation/query.js';
import {
  checkNotificationStatus,
  checkOverlapSeconds,
  checkWebhookEvents,
  checkWebhookHost,
  checkWebhookUrl,
  MAX_OVERLAP_SECONDS,
} from '../validation/webhook.js';
import { actorOf, authorise } from '../access/authorise.js';
import { causeOf } from './key-events.js';
import type { Page } from './page.js';
import { paginate } from './paginate.js';
import type { CoreDeps } from '../deps.js';
import { requireOrganisation } from './require-organisation.js';

export const WEBHOOK_NOT_FOUND_MESSAGE = 'The organisation has no webhook endpoint';
export const DELIVERY_NOT_FOUND_MESSAGE = 'Delivery not found';
/** A rotation's overlap when none is given: the old secret keeps signing for a day. */
export const DEFAULT_OVERLAP_SECONDS = MAX_OVERLAP_SECONDS;

/** What an organisation sets: `PUT …/webhook-endpoint` `{url, events?, enabled?}`. */
export interface EndpointSettings {
  readonly url: unknown;
  readonly events?: readonly string[];
  readonly enabled?: boolean;
}

/** A rotation's result: the new secret (shown once) and when the old one stops signing (null: at once). */
export interface RotatedSecret extends WebhookChange {
  readonly previousSecretExpiresAt: Date | null;
}

/** The owner's body of PUT: `url` required, `events` and `enabled` optional, nothing else. */
function checkEndpointBody(body: unknown): Checked<{ url: unknown; events: readonly string[] | undefined; enabled: boolean | undefined }> {
  if (!isJsonObject(body)) return invalid([{ field: 'body', issue: 'must be a JSON object' }]);
  const details = Object.keys(body)
    .filter((k) => k !== 'url' && k !== 'events' && k !== 'enabled')
    .map((field) => ({ field, issue: ISSUE_EXTRA_FIELD }));
  if (body['url'] === undefined) details.push({ field: 'url', issue: ISSUE_FIELD_REQUIRED });
  let events: readonly string[] | undefined;
  if (body['events'] !== undefined) {
    const checked = checkWebhookEvents(body['events']);
    if (checked.ok) events = checked.value;
    else details.push(...checked.details);
  }
  const enabled = body['enabled'];
  if (enabled !== undefined && typeof enabled !== 'boolean') details.push({ field: 'enabled', issue: 'must be a boolean' });
  if (details.length > 0) return invalid(details);
  return valid({ url: body['url'], events, enabled: enabled as boolean | undefined });
}

/** The owner's body of rotate-secret: optional `overlap_seconds`, nothing else. */
function checkRotateBody(body: unknown): Checked<number> {
  if (body === undefined) return valid(DEFAULT_OVERLAP_SECONDS);
  if (!isJsonObject(body)) return invalid([{ field: 'body', issue: 'must be a JSON object' }]);
  const extra = Object.keys(body).filter((k) => k !== 'overlap_seconds');
  if (extra.length > 0) return invalid(extra.map((field) => ({ field, issue: ISSUE_EXTRA_FIELD })));
  return body['overlap_seconds'] === undefined ? valid(DEFAULT_OVERLAP_SECONDS) : checkOverlapSeconds(body['overlap_seconds']);
}

/** The endpoint after a change; `secret` only when this change made a new one (shown once). */
export interface WebhookChange {
  readonly endpoint: WebhookEndpoint;
  readonly newSecret: string | null;
}

/** What `reencryptSecrets` did: every endpoint looked at, per outcome. */
export interface ReencryptReport {
  /** The key secrets are now sealed under; null: they were decrypted to plaintext (no current key). */
  readonly keyId: string | null;
  readonly examined: number;
  /** Rewritten under the current key (plaintext ones included). */
  readonly reencrypted: number;
  /** Already under the current key. */
  readonly unchanged: number;
  /** Changed or removed by someone else meanwhile (a rotation, say): left alone; a second run looks at them again. */
  readonly skipped: number;
  /** Stored under a key this process does not have, or altered: left as they are. */
  readonly failed: readonly { readonly organisationId: string; readonly error: string }[];
}

const REENCRYPT_PAGE = 100;

/** The operator manages every endpoint; a key reads (webhooks:read) or changes (webhooks:write) its own organisation's. */
function authoriseEndpoint(principal: Principal, mode: 'read' | 'write', orgId: string): void {
  if (principal.kind === 'operator') authorise(principal, 'webhooks.manage');
  else authorise(principal, mode === 'read' ? 'webhooks.read' : 'webhooks.write', orgId);
}

export class Webhooks {
  private readonly secrets: WebhookSecretCipher;

  constructor(private readonly deps: Pick<CoreDeps, 'stores' | 'unitOfWork' | 'clock' | 'random' | 'config' | 'webhookHosts' | 'webhookSecrets'>) {
    this.secrets = deps.webhookSecrets ?? PLAINTEXT_WEBHOOK_SECRETS;
  }

  /** The operator's `org webhook set`: the URL only (events and enabled are kept, or all and true). */
  async set(principal: Principal, orgId: string, url: unknown): Promise<WebhookChange> {
    return this.setEndpoint(principal, orgId, { url });
  }

  /**
   * `PUT …/webhook-endpoint` (webhooks:write): `{url, events?, enabled?}`; `created` says whether
   * the endpoint is new (its secret is then in `newSecret`, shown once). Omitted fields keep their
   * value (a new endpoint: every event, enabled).
   */
  async put(principal: Principal, orgId: string, body: unknown): Promise<WebhookChange & { readonly created: boolean }> {
    authoriseEndpoint(principal, 'write', orgId);
    // Every failing field at once: the URL's form is checked with the rest of the body.
    const policy = { allowHttp: this.deps.config.webhookAllowHttp, allowPrivate: this.deps.config.webhookAllowPrivate };
    const url = isJsonObject(body) && body['url'] !== undefined ? checkWebhookUrl(body['url'], 'url', policy) : valid(undefined);
    const [, settings] = all(checkUuid(orgId, 'org_id'), checkEndpointBody(body), url);
    const change = await this.setEndpoint(principal, orgId, {
      url: settings.url,
      ...(settings.events !== undefined ? { events: settings.events } : {}),
      ...(settings.enabled !== undefined ? { enabled: settings.enabled } : {}),
    });
    return { ...change, created: change.newSecret !== null };
  }

  private async setEndpoint(principal: Principal, orgId: string, settings: EndpointSettings): Promise<WebhookChange> {
    authoriseEndpoint(principal, 'write', orgId);
    const url = settings.url;
    // The destination rules (https only, nothing inside) on the URL, then on what its host resolves to.
    const policy = { allowHttp: this.deps.config.webhookAllowHttp, allowPrivate: this.deps.config.webhookAllowPrivate };
    const [id, checked] = all(checkUuid(orgId, 'org_id'), checkWebhookUrl(url, 'url', policy));
    const [href] = all(await checkWebhookHost(checked, this.deps.webhookHosts, 'url', policy));
    return this.deps.unitOfWork.run(async (stores) => {
      await requireOrganisation(stores.organisations, id);
      const now = this.deps.clock.now();
      const existing = await stores.webhooks.get(id);
      const newSecret = existing === null ? generateWebhookSecret(this.deps.random) : null;
      const kept = existing === null ? null : fullEndpoint(existing);
      const endpoint: WebhookEndpoint = {
        organisationId: id,
        url: href,
        secret: existing?.secret ?? this.secrets.seal(id, newSecret!, this.deps.random),
        createdAt: existing?.createdAt ?? now,
        updatedAt: now,
        events: settings.events ?? kept?.events ?? [ALL_EVENTS],
        enabled: settings.enabled ?? kept?.enabled ?? true,
        previousSecret: kept?.previousSecret ?? null,
        previousSecretExpiresAt: kept?.previousSecretExpiresAt ?? null,
      };
      await stores.webhooks.put(endpoint);
      await stores.audit.append(
        auditEntry(this.deps.random, 'webhook_endpoint_set', now, actorOf(principal), id, null, undefined, { webhook: { origin: webhookOrigin(href) } }),
      );
      return { endpoint, newSecret };
    });
  }

  async show(principal: Principal, orgId: string): Promise<WebhookEndpoint> {
    authoriseEndpoint(principal, 'read', orgId);
    const [id] = all(checkUuid(orgId, 'org_id'));
    await requireOrganisation(this.deps.stores.organisations, id);
    const endpoint = await this.deps.stores.webhooks.get(id);
    if (endpoint === null) throw new NotFoundError(WEBHOOK_NOT_FOUND_MESSAGE, { resource: 'webhook' });
    return endpoint;
  }

  /** Pending notifications of the organisation stay in the outbox and fail on their next attempt. */
  async remove(principal: Principal, orgId: string): Promise<void> {
    authoriseEndpoint(principal, 'write', orgId);
    const [id] = all(checkUuid(orgId, 'org_id'));
    await this.deps.unitOfWork.run(async (stores) => {
      const existing = await stores.webhooks.get(id);
      if (existing === null || !(await stores.webhooks.remove(id))) {
        await requireOrganisation(stores.organisations, id);
        throw new NotFoundError(WEBHOOK_NOT_FOUND_MESSAGE, { resource: 'webhook' });
      }
      await stores.audit.append(
        auditEntry(this.deps.random, 'webhook_endpoint_removed', this.deps.clock.now(), actorOf(principal), id, null, undefined, {
          webhook: { origin: webhookOrigin(existing.url) },
        }),
      );
    });
  }

  /**
   * A new secret, shown once. During `overlapSeconds` (0..86400, default 86400) the replaced secret
   * keeps signing: every delivery carries both signatures, the new one first; 0 drops it at once.
   * The operator passes a number (`--overlap`), a key the request body `{overlap_seconds?}`.
   */
  async rotateSecret(principal: Principal, orgId: string, overlap?: unknown): Promise<RotatedSecret> {
    authoriseEndpoint(principal, 'write', orgId);
    const overlapCheck = typeof overlap === 'number' ? checkOverlapSeconds(overlap) : checkRotateBody(overlap);
    const [id, overlapSeconds] = all(checkUuid(orgId, 'org_id'), overlapCheck);
    return this.deps.unitOfWork.run(async (stores) => {
      const existing = await stores.webhooks.get(id);
      if (existing === null) {
        await requireOrganisation(stores.organisations, id);
        throw new NotFoundError(WEBHOOK_NOT_FOUND_MESSAGE, { resource: 'webhook' });
      }
      const newSecret = generateWebhookSecret(this.deps.random);
      const now = this.deps.clock.now();
      const previousSecretExpiresAt = overlapSeconds > 0 ? new Date(now.getTime() + overlapSeconds * 1000) : null;
      const endpoint: WebhookEndpoint = {
        ...existing,
        secret: this.secrets.seal(id, newSecret, this.deps.random),
        updatedAt: now,
        // The secret replaced (as stored) keeps signing until the overlap ends.
        previousSecret: previousSecretExpiresAt === null ? null : existing.secret,
        previousSecretExpiresAt,
      };
      await stores.webhooks.put(endpoint);
      await stores.audit.append(
        auditEntry(this.deps.random, 'webhook_secret_rotated', now, actorOf(principal), id, null, undefined, {
          webhook: { origin: webhookOrigin(existing.url) },
        }),
      );
      return { endpoint, newSecret, previousSecretExpiresAt };
    });
  }

  /** `POST …/webhook-endpoint/ping`: a `ping` event, delivered like any other (also when disabled). */
  async ping(principal: Principal, orgId: string): Promise<Notification> {
    authoriseEndpoint(principal, 'write', orgId);
    const [id] = all(checkUuid(orgId, 'org_id'));
    return this.deps.unitOfWork.run(async (stores) => {
      await this.existingEndpoint(stores, id);
      const notification = newNotification(this.deps.random, 'ping', this.deps.clock.now(), { organisation_id: id, cause: causeOf(actorOf(principal)) });
      await stores.outbox.enqueue(notification);
      return notification;
    });
  }

  /** `GET …/webhook-endpoint/deliveries` (webhooks:read), query {limit, cursor, status}: oldest first. */
  async deliveries(principal: Principal, orgId: string, query: Readonly<Record<string, unknown>>): Promise<Page<Notification>> {
    authoriseEndpoint(principal, 'read', orgId);
    const status: Checked<NotificationStatus | undefined> = query['status'] === undefined ? valid(undefined) : checkNotificationStatus(query['status']);
    const [id, page, wanted] = all(checkUuid(orgId, 'org_id'), checkListQuery({ limit: query['limit'], cursor: query['cursor'] }), status);
    await this.existingEndpoint(this.deps.stores, id);
    const filter = { organisationId: id, ...(wanted !== undefined ? { status: wanted } : {}) };
    return paginate(page, (p) => this.deps.stores.outbox.list(filter, p), (n) => n);
  }

  /**
   * `POST …/deliveries/{id}/redeliver` (webhooks:write): a failed or pending delivery is due again
   * now with a fresh attempt count (the same `webhook-id`); a delivered one is sent again as a new
   * delivery (a new id: a receiver that drops repeats by id takes it). Audited (notification_retried).
   */
  async redeliver(principal: Principal, orgId: string, deliveryId: string): Promise<Notification> {
    authoriseEndpoint(principal, 'write', orgId);
    const [id, nid] = all(checkUuid(orgId, 'org_id'), checkUuid(deliveryId, 'delivery_id'));
    return this.deps.unitOfWork.run(async (stores) => {
      await this.existingEndpoint(stores, id);
      const existing = await stores.outbox.findById(nid);
      // Another organisation's delivery does not exist for this one.
      if (existing === null || existing.organisationId !== id) throw new NotFoundError(DELIVERY_NOT_FOUND_MESSAGE, { resource: 'delivery' });
      const now = this.deps.clock.now();
      let result: Notification;
      if (existing.status === 'delivered') {
        result = { ...existing, id: this.deps.random.uuid(), status: 'pending', attempts: 0, nextAttemptAt: now, createdAt: now, completedAt: null, lastError: null };
        await stores.outbox.enqueue(result);
      } else {
        if (!(await stores.outbox.retry(nid, now))) throw new ConflictError('The delivery changed meanwhile; list the deliveries again');
        result = (await stores.outbox.findById(nid)) ?? existing;
      }
      await stores.audit.append(
        auditEntry(this.deps.random, 'notification_retried', now, actorOf(principal), id, null, undefined, { notification: { id: existing.id, type: existing.type } }),
      );
      return result;
    });
  }

  private async existingEndpoint(stores: Pick<CoreDeps['stores'], 'organisations' | 'webhooks'>, id: string): Promise<WebhookEndpoint> {
    const endpoint = await stores.webhooks.get(id);
    if (endpoint !== null) return endpoint;
    await requireOrganisation(stores.organisations, id);
    throw new NotFoundError(WEBHOOK_NOT_FOUND_MESSAGE, { resource: 'webhook' });
  }

  /**
   * Rewrites every stored secret that is not under the current key (plaintext ones included; with
   * no current key, sealed ones are decrypted to plaintext). Each rewrite is a compare-and-set, so a
   * rotation committed meanwhile is kept. A secret this process cannot open is reported, not changed.
   */
  async reencryptSecrets(principal: Principal): Promise<ReencryptReport> {
    authorise(principal, 'webhooks.manage');
    let examined = 0;
    let reencrypted = 0;
    let unchanged = 0;
    let skipped = 0;
    const failed: { organisationId: string; error: string }[] = [];
    let after: string | null = null;
    for (;;) {
      const endpoints = await this.deps.stores.webhooks.listAfter(after, REENCRYPT_PAGE);
      for (const w of endpoints) {
        examined += 1;
        if (this.secrets.isCurrent(w.secret)) {
          unchanged += 1;
          continue;
        }
        let secret: string;
        try {
          secret = this.secrets.open(w.organisationId, w.secret);
        } catch (e) {
          if (!(e instanceof WebhookSecretUnreadableError)) throw e;
          failed.push({ organisationId: w.organisationId, error: e.message });
          continue;
        }
        const sealed = this.secrets.seal(w.organisationId, secret, this.deps.random);
        if (await this.deps.stores.webhooks.replaceSecret(w.organisationId, w.secret, sealed)) reencrypted += 1;
        else skipped += 1;
      }
      if (endpoints.length < REENCRYPT_PAGE) break;
      after = endpoints[endpoints.length - 1]!.organisationId;
    }
    return { keyId: this.secrets.currentKeyId, examined, reencrypted, unchanged, skipped, failed };
  }
}
