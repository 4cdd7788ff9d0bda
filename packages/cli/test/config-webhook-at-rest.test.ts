/**
 * WEBHOOK_SECRET_ENCRYPTION_KEY, WEBHOOK_SECRET_PREVIOUS_KEYS and NOTIFICATION_RETENTION (operations
 * guide, sections 1 and 8): the forms taken, the refusals naming the variable without repeating a
 * key, and a configuration that never prints or serialises a key.
 */
import { randomBytes } from 'node:crypto';
import { inspect } from 'node:util';
import { expect } from 'chai';
import { webhookSecretKeyId } from '@cos/core';
import { loadConfig } from '../src/config.js';

const load = (env: Record<string, string>) => loadConfig({ DATABASE_URL: 'sqlite::memory:', ...env }, { envFile: false });

describe('configuration: webhook secrets at rest and the outbox retention', () => {
  const key = randomBytes(32);
  const previous = [randomBytes(32), randomBytes(32)];

  it('WEBHOOK_SECRET_ENCRYPTION_KEY: unset stores secrets in clear; 64 hex digits or base64 of 32 bytes name the same key', () => {
    expect(load({}).webhookSecrets.currentKeyId).to.equal(null);
    expect(load({}).webhookSecrets.keyIds).to.deep.equal([]);
    for (const text of [key.toString('hex'), key.toString('base64'), key.toString('base64url')]) {
      expect(load({ WEBHOOK_SECRET_ENCRYPTION_KEY: text }).webhookSecrets.currentKeyId, text).to.equal(webhookSecretKeyId(key));
    }
  });

  it('WEBHOOK_SECRET_PREVIOUS_KEYS: a comma-separated list, each key able to open, the current one first', () => {
    const config = load({
      WEBHOOK_SECRET_ENCRYPTION_KEY: key.toString('base64'),
      WEBHOOK_SECRET_PREVIOUS_KEYS: ` ${previous[0]!.toString('hex')} , ${previous[1]!.toString('base64')},`,
    });
    expect(config.webhookSecrets.keyIds).to.deep.equal([webhookSecretKeyId(key), ...previous.map((k) => webhookSecretKeyId(k))]);
  });

  it('a key of the wrong length or form is refused naming the variable (and which key of the list), never repeating the value', () => {
    for (const bad of [randomBytes(16).toString('hex'), randomBytes(31).toString('base64'), 'not a key at all', randomBytes(33).toString('base64')]) {
      let message = '';
      try {
        load({ WEBHOOK_SECRET_ENCRYPTION_KEY: bad });
      } catch (e) {
        message = (e as Error).message;
      }
      expect(message, bad).to.match(/^invalid configuration: WEBHOOK_SECRET_ENCRYPTION_KEY must be 32 bytes written as 64 hex digits or as base64/);
      expect(message).not.to.include(bad);
    }
    const bad = randomBytes(20).toString('hex');
    let message = '';
    try {
      load({ WEBHOOK_SECRET_PREVIOUS_KEYS: `${previous[0]!.toString('hex')},${bad}` });
    } catch (e) {
      message = (e as Error).message;
    }
    expect(message).to.match(/^invalid configuration: WEBHOOK_SECRET_PREVIOUS_KEYS \(key 2\) must be 32 bytes/);
    expect(message).not.to.include(bad).and.not.to.include(previous[0]!.toString('hex'));
  });

  it('the loaded configuration never shows a key: not in JSON, not in inspect()', () => {
    const config = load({ WEBHOOK_SECRET_ENCRYPTION_KEY: key.toString('hex'), WEBHOOK_SECRET_PREVIOUS_KEYS: previous[0]!.toString('base64') });
    const shown = `${JSON.stringify(config)}\n${inspect(config, { depth: 10, showHidden: true })}`;
    for (const k of [key, previous[0]!]) {
      expect(shown).not.to.include(k.toString('hex')).and.not.to.include(k.toString('base64'));
      expect(shown).not.to.match(new RegExp(`\\b${[...k.subarray(0, 6)].join(',\\s*')}\\b`), 'the bytes themselves');
    }
  });

  it('NOTIFICATION_RETENTION: 30d by default; a duration of the CLI grammar, more than zero; anything else is refused naming the variable', () => {
    expect(load({}).notificationRetentionMs).to.equal(30 * 24 * 60 * 60 * 1000);
    expect(load({ NOTIFICATION_RETENTION: '7d' }).notificationRetentionMs).to.equal(7 * 24 * 60 * 60 * 1000);
    expect(load({ NOTIFICATION_RETENTION: '12h' }).notificationRetentionMs).to.equal(12 * 60 * 60 * 1000);
    expect(load({ NOTIFICATION_RETENTION: '90m' }).notificationRetentionMs).to.equal(90 * 60 * 1000);
    expect(load({ NOTIFICATION_RETENTION: '1w2d' }).notificationRetentionMs).to.equal(9 * 24 * 60 * 60 * 1000);
    expect(load({ NOTIFICATION_RETENTION: '1h30m' }).notificationRetentionMs).to.equal(90 * 60 * 1000);
    for (const bad of ['0d', '0', '30', '1.5d', '2 weeks', '1y', '-1d', '30D', '30m1h', 'forever', '1234567d']) {
      expect(() => load({ NOTIFICATION_RETENTION: bad }), bad).to.throw(
        /^invalid configuration: NOTIFICATION_RETENTION must be more than zero and a duration: whole numbers with units w, d, h, m, s, largest first, each once \(30s, 15m, 12h, 7d, 2w, 1h30m\)$/,
      );
    }
  });
});
