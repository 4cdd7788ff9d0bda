/**
 * A second process on the same SQLite file, as `cos-admin key issue …` next to `cos-admin serve`:
 * run by SqliteChild (sqlite-child.ts) with `node --import tsx --conditions=source`. It opens the
 * file through createSqlStore (the embedded default: its own one-connection pool) and talks JSON
 * lines on stdout; stdin carries the parent's "go".
 *
 *   churn <file> <organisationId> <count>  ready; waits for "go"; runs churn(); prints {result}
 *   hold <file> <organisationId> <ms>      ready; a unit of work inserts a key, prints {locked},
 *                                          keeps the write transaction open <ms>, commits, prints {committed}
 *   revoke <file> <organisationId> <keyId> ready; revokes the key (a single statement), prints {revoked}
 *   serve <file> <organisationId>          ready; then per stdin line {id, command} runs applyWrite(command)
 *                                          (store-writes.ts) and prints {id, done} once it committed;
 *                                          exits when stdin ends
 */
import { createInterface } from 'node:readline';
import { createSqlStore } from '@cos/store-sql';
import { churn } from './key-churn.js';
import { issuedKey } from './fixtures.js';
import { applyWrite, type WriteCommand } from './store-writes.js';
import { storePorts } from '@cos/core/testing/contracts';

function say(message: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify(message)}\n`);
}

function nextLine(): Promise<string> {
  const lines = createInterface({ input: process.stdin });
  return new Promise((resolve, reject) => {
    lines.once('line', (line) => {
      resolve(line); // before close(): that emits 'close' at once
      lines.close();
    });
    lines.once('close', () => reject(new Error('stdin closed before the parent said "go"')));
  });
}

async function main(): Promise<void> {
  const [mode, file, organisationId, number] = process.argv.slice(2);
  if (file === undefined || organisationId === undefined || (number === undefined && mode !== 'serve')) {
    throw new Error('usage: churn|hold|revoke <file> <organisationId> <n> | serve <file> <organisationId>');
  }
  const store = createSqlStore({ databaseUrl: `sqlite:${file}` });
  try {
    // Open the connection (and check the file is migrated) before saying ready.
    if ((await store.stores.organisations.findById(organisationId)) === null) throw new Error('organisation missing');
    say({ ready: true, pid: process.pid });
    if (mode === 'churn') {
      if ((await nextLine()) !== 'go') throw new Error('expected "go"');
      say({ result: await churn(store, organisationId, Number(number), `child ${process.pid}`) });
    } else if (mode === 'hold') {
      const { key } = issuedKey(organisationId);
      await store.unitOfWork.run(async (tx) => {
        await tx.apiKeys.insert(key);
        say({ locked: true, keyId: key.id });
        await new Promise((resolve) => setTimeout(resolve, Number(number)));
      });
      say({ committed: true, keyId: key.id });
    } else if (mode === 'revoke') {
      say({ revoked: await storePorts(store).apiKeys.revoke(organisationId, String(number), new Date()) });
    } else if (mode === 'serve') {
      // One write at a time, in the order the parent sent them.
      for await (const line of createInterface({ input: process.stdin })) {
        const { id, command } = JSON.parse(line) as { id: number; command: WriteCommand };
        say({ id, done: await applyWrite(store, command) });
      }
    } else {
      throw new Error(`unknown mode ${String(mode)}`);
    }
  } finally {
    await store.close();
  }
}

main().then(
  () => process.exit(0),
  (e: unknown) => {
    say({ error: e instanceof Error ? `${e.name}: ${e.message}` : String(e) });
    process.exit(1);
  },
);
