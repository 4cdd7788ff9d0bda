import { createSqlStore } from '@cos/store-sql';
import { cryptoRandom, digestKey, generateRawKey, keyPrefixOf } from '@cos/core';
import { randomUUID } from 'node:crypto';
const url = process.argv[2]!;
const schema = 'bench_' + randomUUID().slice(0, 8);
const s = createSqlStore({ databaseUrl: url, schema: url.startsWith('postgres') ? schema : undefined });
if (s.dialect === 'postgres') await s.knex.raw(`create schema ${schema}`);
try {
  await s.migrate();
  const now = new Date();
  const org = { id: randomUUID(), name: 'A', slug: 'a', industrySection: null, isSystem: false, createdAt: now, updatedAt: now };
  await s.stores.organisations.create(org);
  const digests: string[] = [];
  for (let i = 0; i < 1000; i++) { const raw = generateRawKey('live', cryptoRandom); digests.push(digestKey(raw)); await s.stores.apiKeys.insert({ id: randomUUID(), organisationId: org.id, label: 'x', keyPrefix: keyPrefixOf(raw), digest: digestKey(raw), expiresAt: null, createdAt: now, revokedAt: null }); }
  for (const N of [2000, 5000, 5000]) {
    let t = performance.now();
    for (let i = 0; i < N; i++) await s.stores.apiKeys.findCredential(digests[i % 1000]!);
    const seq = (performance.now() - t) / N;
    t = performance.now();
    let failed = 0;
    await Promise.all(Array.from({ length: N }, (_, i) => s.stores.apiKeys.findCredential(digests[i % 1000]!).catch(() => { failed++; })));
    const par = performance.now() - t;
    console.log(s.dialect, N, `findCredential seq ${(seq * 1000).toFixed(0)} µs/op; ${N} concurrent ${par.toFixed(0)} ms, failed ${failed}`);
  }
} finally {
  if (s.dialect === 'postgres') await s.knex.raw(`drop schema ${schema} cascade`);
  await s.close();
}
