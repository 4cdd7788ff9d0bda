/** In memory: each organisation's webhook endpoint (WebhookStore). */
import { timingSafeEqual } from 'node:crypto';
import { fullEndpoint, type WebhookEndpoint } from '../../domain/webhook.js';
import type { WebhookStore } from '../../ports/webhook-store.js';
import { copyDate, copyDateOrNull } from '../in-memory-tables.js';
import type { Session } from '../in-memory-session.js';

function copyWebhook(w: WebhookEndpoint): WebhookEndpoint {
  const full = fullEndpoint(w);
  return {
    organisationId: w.organisationId,
    url: w.url,
    secret: w.secret,
    createdAt: copyDate(w.createdAt),
    updatedAt: copyDate(w.updatedAt),
    events: [...full.events],
    enabled: full.enabled,
    previousSecret: full.previousSecret,
    previousSecretExpiresAt: copyDateOrNull(full.previousSecretExpiresAt),
  };
}

export class InMemoryWebhookStore implements WebhookStore {
  constructor(private readonly session: Session) {}

  async get(organisationId: string): Promise<WebhookEndpoint | null> {
    return this.session.read((t) => {
      const w = t.webhooks.get(organisationId);
      return w === undefined ? null : copyWebhook(w);
    });
  }

  async put(endpoint: WebhookEndpoint): Promise<void> {
    const record = copyWebhook(endpoint);
    this.session.write((t) => {
      if (!t.organisations.has(record.organisationId)) throw new Error('webhook for an organisation that does not exist');
      t.webhooks.set(record.organisationId, record);
    });
  }

  async remove(organisationId: string): Promise<boolean> {
    return this.session.write((t) => t.webhooks.delete(organisationId));
  }

  async listAfter(afterOrganisationId: string | null, limit: number): Promise<WebhookEndpoint[]> {
    return this.session.read((t) =>
      [...t.webhooks.values()]
        .filter((w) => afterOrganisationId === null || w.organisationId > afterOrganisationId)
        .sort((a, b) => (a.organisationId < b.organisationId ? -1 : a.organisationId > b.organisationId ? 1 : 0))
        .slice(0, Math.max(0, limit))
        .map(copyWebhook),
    );
  }

  async replaceSecret(organisationId: string, expected: string, next: string): Promise<boolean> {
    return this.session.write((t) => {
      const w = t.webhooks.get(organisationId);
      if (w === undefined || !sameSecret(w.secret, expected)) return false;
      t.webhooks.set(organisationId, { ...w, secret: next });
      return true;
    });
  }
}

/** A stored secret compared in constant time (C-31), as the SQL stores compare it in the database. */
function sameSecret(a: string, b: string): boolean {
  const ba = Buffer.from(a, 'utf8');
  const bb = Buffer.from(b, 'utf8');
  return ba.length === bb.length && timingSafeEqual(ba, bb);
}
