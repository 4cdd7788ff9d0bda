import { createSqlStore } from '@cos/store-sql';
const url = process.argv[2]!;
const s = createSqlStore({ databaseUrl: url });
await s.knex.raw('select 1');
for (const N of [1000, 2000, 5000]) {
  let t = performance.now();
  for (let i = 0; i < N; i++) await s.knex.raw('select 1');
  const seq = (performance.now() - t) / N;
  t = performance.now();
  let failed = 0;
  await Promise.all(Array.from({ length: N }, () => s.knex.raw('select 1').catch(() => { failed++; })));
  const par = performance.now() - t;
  console.log(N, `seq ${(seq * 1000).toFixed(0)} µs/op; ${N} concurrent took ${par.toFixed(0)} ms, failed ${failed}`);
}
await s.close();
