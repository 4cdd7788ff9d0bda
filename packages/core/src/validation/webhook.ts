/**
 * Webhook endpoint URL: an absolute http(s) URL of at most 2048 characters, with no fragment and no
 * user or password (a credential would end up in the outbox's records), whose destination the
 * policy allows (https only, no internal host: domain/webhook-destination.ts).
 */
import { isIP } from 'node:net';
import { invalid, valid, type Checked } from './issues.js';
import { ALL_EVENTS, NOTIFICATION_STATUSES, SUBSCRIBABLE_EVENT_TYPES, type NotificationStatus } from '../domain/webhook.js';
import {
  STRICT_WEBHOOK_POLICY,
  addressRefusal,
  urlRefusal,
  type DestinationRefusal,
  type WebhookDestinationPolicy,
} from '../domain/webhook-destination.js';
import type { WebhookHostResolver } from '../ports/webhook-sender.js';

export const MAX_WEBHOOK_URL = 2048;
export const ISSUE_WEBHOOK_URL = `must be an absolute http:// or https:// URL of at most ${MAX_WEBHOOK_URL} characters, without user or password`;
export const ISSUE_NOTIFICATION_STATUS = `must be one of ${NOTIFICATION_STATUSES.join(', ')}`;

/** The variable an operator sets to allow what a refusal names. */
const ALLOWED_BY: Readonly<Record<keyof WebhookDestinationPolicy, string>> = {
  allowHttp: 'WEBHOOK_ALLOW_HTTP=true',
  allowPrivate: 'WEBHOOK_ALLOW_PRIVATE=true (development and tests only)',
};

/** The detail's text for a refused destination: what is wrong, and what would allow it if anything. */
export function webhookDestinationIssue(refusal: DestinationRefusal): string {
  return refusal.allowedBy === null ? refusal.reason : `${refusal.reason}; ${ALLOWED_BY[refusal.allowedBy]} allows it`;
}

export function checkWebhookUrl(value: unknown, field = 'url', policy: WebhookDestinationPolicy = STRICT_WEBHOOK_POLICY): Checked<string> {
  if (typeof value !== 'string' || value.length === 0 || value.length > MAX_WEBHOOK_URL) return invalid([{ field, issue: ISSUE_WEBHOOK_URL }]);
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return invalid([{ field, issue: ISSUE_WEBHOOK_URL }]);
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.hostname === '' || url.hash !== '' || url.username !== '' || url.password !== '') {
    return invalid([{ field, issue: ISSUE_WEBHOOK_URL }]);
  }
  const refusal = urlRefusal(url, policy);
  if (refusal !== null) return invalid([{ field, issue: webhookDestinationIssue(refusal) }]);
  return valid(url.href);
}

/**
 * A checked URL whose host is a name: every address it resolves to now must be allowed too. A name
 * that does not resolve (yet) passes: each delivery resolves and checks again before connecting.
 */
export async function checkWebhookHost(
  href: string,
  hosts: WebhookHostResolver | null,
  field = 'url',
  policy: WebhookDestinationPolicy = STRICT_WEBHOOK_POLICY,
): Promise<Checked<string>> {
  const { hostname } = new URL(href);
  if (hosts === null || hostname.startsWith('[') || isIP(hostname) !== 0) return valid(href);
  for (const address of await hosts.resolve(hostname)) {
    const refusal = addressRefusal(address, policy, hostname);
    if (refusal !== null) return invalid([{ field, issue: webhookDestinationIssue(refusal) }]);
  }
  return valid(href);
}

export function checkNotificationStatus(value: unknown, field = 'status'): Checked<NotificationStatus> {
  return typeof value === 'string' && (NOTIFICATION_STATUSES as readonly string[]).includes(value)
    ? valid(value as NotificationStatus)
    : invalid([{ field, issue: ISSUE_NOTIFICATION_STATUS }]);
}


const ISSUE_WEBHOOK_EVENTS = `must be ["*"] or a non-empty list of distinct event types (${SUBSCRIBABLE_EVENT_TYPES.join(', ')})`;
const ISSUE_OVERLAP_SECONDS = 'must be an integer from 0 to 86400';
export const MAX_OVERLAP_SECONDS = 86_400;

/** `events`: `["*"]`, or distinct subscribable event types (at least one). */
export function checkWebhookEvents(value: unknown, field = 'events'): Checked<readonly string[]> {
  if (!Array.isArray(value) || value.length === 0 || !value.every((v) => typeof v === 'string')) return invalid([{ field, issue: ISSUE_WEBHOOK_EVENTS }]);
  const events = value as string[];
  if (events.length === 1 && events[0] === ALL_EVENTS) return valid([ALL_EVENTS]);
  const known = new Set<string>(SUBSCRIBABLE_EVENT_TYPES);
  if (new Set(events).size !== events.length || !events.every((e) => known.has(e))) return invalid([{ field, issue: ISSUE_WEBHOOK_EVENTS }]);
  return valid([...events].sort());
}

/** `overlap_seconds`: 0..86400 (a whole number of seconds). */
export function checkOverlapSeconds(value: unknown, field = 'overlap_seconds'): Checked<number> {
  if (typeof value === 'number' && Number.isInteger(value) && value >= 0 && value <= MAX_OVERLAP_SECONDS) return valid(value);
  return invalid([{ field, issue: ISSUE_OVERLAP_SECONDS }]);
}
