/**
 * Webhook endpoint URL: an absolute http(s) URL of at most 2048 characters, with no fragment and no
 * user or password (fetch refuses those, and a credential would end up in the outbox's records).
 */
import { invalid, valid, type Checked } from './issues.js';
import { NOTIFICATION_STATUSES, type NotificationStatus } from '../domain/webhook.js';

export const MAX_WEBHOOK_URL = 2048;
export const ISSUE_WEBHOOK_URL = `must be an absolute http:// or https:// URL of at most ${MAX_WEBHOOK_URL} characters, without user or password`;
export const ISSUE_NOTIFICATION_STATUS = `must be one of ${NOTIFICATION_STATUSES.join(', ')}`;

export function checkWebhookUrl(value: unknown, field = 'url'): Checked<string> {
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
  return valid(url.href);
}

export function checkNotificationStatus(value: unknown, field = 'status'): Checked<NotificationStatus> {
  return typeof value === 'string' && (NOTIFICATION_STATUSES as readonly string[]).includes(value)
    ? valid(value as NotificationStatus)
    : invalid([{ field, issue: ISSUE_NOTIFICATION_STATUS }]);
}

