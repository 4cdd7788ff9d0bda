/**
 * An organisation's webhook endpoint, managed by the operator (C-59): set (a new endpoint gets a new
 * signing secret, shown once; changing the URL keeps the secret), show (never the secret), remove,
 * rotate the secret (the new one shown once; deliveries from then on are signed with it).
 */
import { NotFoundError } from '../domain/errors.js';
import type { Principal } from '../domain/principal.js';
import { generateWebhookSecret, type WebhookEndpoint } from '../domain/webhook.js';
import { checkUuid } from '../validation/ids.js';
import { all } from '../validation/issues.js';
import { checkWebhookHost, checkWebhookUrl } from '../validation/webhook.js';
import { authorise } from './authorise.js';
import type { CoreDeps } from './deps.js';
import { ORGANISATION_NOT_FOUND_MESSAGE } from './organisations.js';

export const WEBHOOK_NOT_FOUND_MESSAGE = 'The organisation has no webhook endpoint';

/** The endpoint after a change; `secret` only when this change made a new one (shown once). */
export interface WebhookChange {
  readonly endpoint: WebhookEndpoint;
  readonly newSecret: string | null;
}

export class Webhooks {
  constructor(private readonly deps: Pick<CoreDeps, 'stores' | 'unitOfWork' | 'clock' | 'random' | 'config' | 'webhookHosts'>) {}

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
        secret: existing?.secret ?? newSecret!,
        createdAt: existing?.createdAt ?? now,
        updatedAt: now,
      };
      await stores.webhooks.put(endpoint);
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
    if (!(await this.deps.stores.webhooks.remove(id))) {
      if ((await this.deps.stores.organisations.findById(id)) === null) throw new NotFoundError(ORGANISATION_NOT_FOUND_MESSAGE);
      throw new NotFoundError(WEBHOOK_NOT_FOUND_MESSAGE);
    }
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
      const endpoint: WebhookEndpoint = { ...existing, secret: newSecret, updatedAt: this.deps.clock.now() };
      await stores.webhooks.put(endpoint);
      return { endpoint, newSecret };
    });
  }
}
