/**
 * The two parties around the service in the leaked-key flow, played for real: the secret-scanning
 * programme (its own P-256 key pair, the public-key file in the programme's shape, ECDSA-signed
 * alerts) and an organisation's webhook receiver (a local HTTP server that verifies every delivery
 * with the `standardwebhooks` library and can be down, slow or failing on demand).
 */
import { generateKeyPairSync, randomBytes, sign, type KeyObject } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Webhook } from 'standardwebhooks';

export interface Scanner {
  readonly keyId: string;
  /** Path of the public-key file (SECRET_SCANNING_PUBLIC_KEYS). */
  readonly keyFile: string;
  /** The headers of a signed alert over exactly `body`. */
  headers(body: string | Buffer, keyId?: string, key?: KeyObject): Record<string, string>;
  /** A second key pair, not in the file. */
  readonly strangerKey: KeyObject;
}

function p256(): { privateKey: KeyObject; publicKey: KeyObject } {
  return generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
}

export function makeScanner(dir: string): Scanner {
  const { privateKey, publicKey } = p256();
  const keyId = randomBytes(32).toString('hex');
  const keyFile = join(dir, 'secret-scanning-keys.json');
  writeFileSync(
    keyFile,
    JSON.stringify({ public_keys: [{ key_identifier: keyId, key: publicKey.export({ type: 'spki', format: 'pem' }), is_current: true }] }),
  );
  return {
    keyId,
    keyFile,
    strangerKey: p256().privateKey,
    headers(body, id = keyId, key = privateKey) {
      return {
        'content-type': 'application/json',
        'github-public-key-identifier': id,
        'github-public-key-signature': sign('sha256', Buffer.from(body), { key, dsaEncoding: 'der' }).toString('base64'),
      };
    },
  };
}

export interface Delivery {
  readonly id: string;
  readonly type: string;
  readonly body: Record<string, unknown>;
  readonly raw: string;
  readonly verified: boolean;
}

export interface Receiver {
  readonly url: string;
  readonly port: number;
  /** Verified and answered 2xx. */
  readonly delivered: Delivery[];
  /** Every request received, answered or not. */
  readonly received: number;
  /** What the next requests get: 'ok' (204), 'fail' (500), 'hang' (no answer until closed). */
  mode: 'ok' | 'fail' | 'hang';
  /** Resolves once `predicate` holds over the deliveries (polls), or rejects after `timeoutMs`. */
  waitFor(predicate: (d: readonly Delivery[]) => boolean, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

function readAll(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    req.setEncoding('utf8').on('data', (d: string) => (text += d));
    req.on('end', () => resolve(text));
    req.on('error', reject);
  });
}

/** A receiver for `secret` on `port` (0: any free port). */
export async function startReceiver(secret: () => string, port = 0): Promise<Receiver> {
  const delivered: Delivery[] = [];
  let received = 0;
  const hanging = new Set<import('node:http').ServerResponse>();
  const receiver = {
    mode: 'ok' as Receiver['mode'],
  };
  const server: Server = createServer((req, res) => {
    received += 1;
    void readAll(req).then((raw) => {
      if (receiver.mode === 'hang') {
        hanging.add(res);
        return;
      }
      if (receiver.mode === 'fail') {
        res.writeHead(500).end();
        return;
      }
      let verified = false;
      let body: Record<string, unknown> = {};
      try {
        body = new Webhook(secret()).verify(raw, req.headers as Record<string, string>) as Record<string, unknown>;
        verified = true;
      } catch {
        verified = false;
      }
      delivered.push({ id: String(req.headers['webhook-id']), type: String(body['type']), body, raw, verified });
      res.writeHead(verified ? 204 : 400).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  const actual = (server.address() as AddressInfo).port;
  // defineProperties, not Object.assign: `received` must stay a getter.
  return Object.defineProperties(receiver, Object.getOwnPropertyDescriptors({
    url: `http://127.0.0.1:${actual}/hooks/cos`,
    port: actual,
    delivered,
    get received() {
      return received;
    },
    async waitFor(predicate: (d: readonly Delivery[]) => boolean, timeoutMs = 15_000) {
      const until = Date.now() + timeoutMs;
      while (!predicate(delivered)) {
        if (Date.now() > until) throw new Error(`receiver: condition not met in ${timeoutMs} ms; got ${JSON.stringify(delivered.map((d) => d.type))}`);
        await new Promise((r) => setTimeout(r, 25));
      }
    },
    close() {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  })) as Receiver;
}
