/**
 * An organisation's webhook endpoint, managed by the operator (C-59): set (a new endpoint gets a new
 * signing secret, shown once; changing the URL keeps the secret), show (never the secret), remove,
 * rotate the secret (the new one shown once; deliveries from then on are signed with it). Each
 * change writes its audit entry (the endpoint's origin, never the secret or the URL's path) in the
 * same unit of work. New secrets are stored sealed when an encryption key is configured
 * (WebhookSecretCipher); `reencryptSecrets` moves every stored secret under the current key.
 */
import { NotFoundError } from '../domain/errors.js';
import type { Principal } from '../domain/principal.js';
import { generateWebhookSecret, webhookOrigin, type WebhookEndpoint } from '../domain/webhook.js';
import { PLAINTEXT_WEBHOOK_SECRETS, WebhookSecretUnreadableError, type WebhookSecretCipher } from '../domain/webhook-secret-cipher.js';
import { auditEntry } from './audit-entry.js';
import { checkUuid } from '../validation/ids.js';
import { all } from '../validation/issues.js';
import { checkWebhookHost, checkWebhookUrl } from '../validation/webhook.js';
import { actorOf, authorise } from './authorise.js';
import type { CoreDeps } from './deps.js';
import { ORGANISATION_NOT_FOUND_MESSAGE } from './organisations.js';

export const WEBHOOK_NOT_FOUND_MESSAGE = 'The organisation has no webhook endpoint';

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

export class Webhooks {
  private readonly secrets: WebhookSecretCipher;

  constructor(private readonly deps: Pick<CoreDeps, 'stores' | 'unitOfWork' | 'clock' | 'random' | 'config' | 'webhookHosts' | 'webhookSecrets'>) {
    this.secrets = deps.webhookSecrets ?? PLAINTEXT_WEBHOOK_SECRETS;
  }

  async set(principal: Principal, orgId: string, url: unknown): Promise<WebhookChange> {
    authorise(principal, 'webhooks.manage');
    // The destination rules (https only, nothing inside) on the URL, then on what its host resolves to.
    const policy = { allowHttp: this.deps.config.webhookAllowHttp, allowPrivate: this.deps.config.webhookAllowPrivate };
    const [id, checked] = all(checkUuid(orgId, 'org_id'), checkWebhookUrl(url, 'url', policy));
    const [href] = all(await checkWebhookHost(checked, this.deps.webhookHosts, 'url', policy));
    return this.deps.unitOfWork.run(async (stores) => {
      if ((await stores.organisations.findById(id)) === null) throw new NotFoundError(ORGANISATION_NOT_FOUND_MESSAGE);
      const now = this.deps.clock.now();
      const existing = await stores.webhooks.get(id);
      const newSecret = existing === null ? generateWebhookSecret(this.deps.random) : null;
      const endpoint: WebhookEndpoint = {
        organisationId: id,
        url: href,
        secret: existing?.secret ?? this.secrets.seal(id, newSecret!, this.deps.random),
        createdAt: existing?.createdAt ?? now,
        updatedAt: now,
      };
      await stores.webhooks.put(endpoint);
      await stores.audit.append(
        auditEntry(this.deps.random, 'webhook_endpoint_set', now, actorOf(principal), id, null, undefined, { webhook: { origin: webhookOrigin(href) } }),
      );
      return { endpoint, newSecret };
    });
  }

  async show(principal: Principal, orgId: string): Promise<WebhookEndpoint> {
    authorise(principal, 'webhooks.manage');
    const [id] = all(checkUuid(orgId, 'org_id'));
    if ((await this.deps.stores.organisations.findById(id)) === null) throw new NotFoundError(ORGANISATION_NOT_FOUND_MESSAGE);
    const endpoint = await this.deps.stores.webhooks.get(id);
    if (endpoint === null) throw new NotFoundError(WEBHOOK_NOT_FOUND_MESSAGE);
    return endpoint;
  }

  /** Pending notifications of the organisation stay in the outbox and fail on their next attempt. */
  async remove(principal: Principal, orgId: string): Promise<void> {
    authorise(principal, 'webhooks.manage');
    const [id] = all(checkUuid(orgId, 'org_id'));
    await this.deps.unitOfWork.run(async (stores) => {
      const existing = await stores.webhooks.get(id);
      if (existing === null || !(await stores.webhooks.remove(id))) {
        if ((await stores.organisations.findById(id)) === null) throw new NotFoundError(ORGANISATION_NOT_FOUND_MESSAGE);
        throw new NotFoundError(WEBHOOK_NOT_FOUND_MESSAGE);
      }
      await stores.audit.append(
        auditEntry(this.deps.random, 'webhook_endpoint_removed', this.deps.clock.now(), actorOf(principal), id, null, undefined, {
          webhook: { origin: webhookOrigin(existing.url) },
        }),
      );
    });
  }

  async rotateSecret(principal: Principal, orgId: string): Promise<WebhookChange> {
    authorise(principal, 'webhooks.manage');
    const [id] = all(checkUuid(orgId, 'org_id'));
    return this.deps.unitOfWork.run(async (stores) => {
      const existing = await stores.webhooks.get(id);
      if (existing === null) {
        if ((await stores.organisations.findById(id)) === null) throw new NotFoundError(ORGANISATION_NOT_FOUND_MESSAGE);
        throw new NotFoundError(WEBHOOK_NOT_FOUND_MESSAGE);
      }
      const newSecret = generateWebhookSecret(this.deps.random);
      const now = this.deps.clock.now();
      const endpoint: WebhookEndpoint = { ...existing, secret: this.secrets.seal(id, newSecret, this.deps.random), updatedAt: now };
      await stores.webhooks.put(endpoint);
      await stores.audit.append(
        auditEntry(this.deps.random, 'webhook_secret_rotated', now, actorOf(principal), id, null, undefined, {
          webhook: { origin: webhookOrigin(existing.url) },
        }),
      );
      return { endpoint, newSecret };
    });
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
