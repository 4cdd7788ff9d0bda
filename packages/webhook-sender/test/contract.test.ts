/** The WebhookSender contract (C-59) against the HTTP sender, on a real local receiver. */
import { describeWebhookSender } from '@cos/core/testing/contracts';
import { createWebhookSender } from '@cos/webhook-sender';

describeWebhookSender('@cos/webhook-sender (standardwebhooks over fetch)', () => createWebhookSender());
