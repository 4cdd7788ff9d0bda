/** The WebhookSender contract (C-59) against the HTTP sender, on a real local receiver. */
import { describeWebhookHostResolver, describeWebhookSender } from '@cos/core/testing/contracts';
import { createWebhookSender, dnsHostResolver } from '@cos/webhook-sender';

describeWebhookSender('@cos/webhook-sender (standardwebhooks over node:http)', (policy) => createWebhookSender(policy));
describeWebhookHostResolver('@cos/webhook-sender dnsHostResolver (the system resolver)', () => dnsHostResolver);
