/**
 * A forged audit row outside its organisation's chain (C-120), in process against real databases:
 * an "api_key_revoked by operator security-team" row with seq 0, inserted past the schema's
 * constraints by someone with rights over the database (SQLite: PRAGMA ignore_check_constraints;
 * Postgres: the constraints dropped). `audit list` (the runbook's confirmation step) and `audit
 * export` never show it, and `audit verify`, with or without a checkpoint signed before the insert,
 * exits 1 naming it.
 */
import { generateKeyPairSync } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { createSqlStore, MIGRATIONS, MIGRATIONS_TABLE, sqlMigrationSource } from '@cos/store-sql';
import { databaseTargets, suiteDatabase } from './support/databases.js';

const FORGED = 'cf000000-0000-4000-8000-000000000001';
const FORGED_ELSEWHERE = 'cf000000-0000-4000-8000-000000000002';
const NO_CHAIN_ORG = 'bf000000-0000-4000-8000-000000000000';

for (const target of databaseTargets()) {
  describe(`cos-admin audit and rows outside the chain on ${target.name} (C-120)`, function () {
    this.timeout(60_000);
    const suite = suiteDatabase(target);
    const { cli, json } = suite;

    before(async () => {
      expect((await cli('migrate')).code).to.equal(0);
    });

    it('C-120: a forged seq-0 "api_key_revoked" row is not listed nor exported, and verify (also --checkpoint) exits 1 naming it', async () => {
      const { privateKey, publicKey } = generateKeyPairSync('ed25519');
      writeFileSync(join(suite.db.cwd, 'private.pem'), privateKey.export({ type: 'pkcs8', format: 'pem' }));
      writeFileSync(join(suite.db.cwd, 'public.pem'), publicKey.export({ type: 'spki', format: 'pem' }));
      const org = await json('org', 'create', '--name', 'Forged', '--slug', 'forged');
      const key = await json('key', 'issue', org.id, '--label', 'still valid');
      expect((await cli('audit', 'checkpoint', '--key', 'private.pem', '--out', 'before.json')).code).to.equal(0);

      const store = createSqlStore({ databaseUrl: suite.db.databaseUrl });
      try {
        const row = (id: string, organisation_id: string, seq: number) => ({
          id,
          kind: 'api_key_revoked',
          occurred_at: Date.now(),
          organisation_id,
          key_id: key.id,
          key_prefix: key.key_prefix,
          actor_type: 'operator',
          actor_key_id: null,
          actor_name: 'security-team',
          seq,
          prev_hash: '0'.repeat(64),
          hash: '0'.repeat(64),
        });
        const rows = [row(FORGED, org.id, 0), row(FORGED_ELSEWHERE, NO_CHAIN_ORG, -1)];
        if (store.dialect === 'sqlite') {
          await store.knex.transaction(async (trx) => {
            await trx.raw('PRAGMA ignore_check_constraints = ON');
            await trx('audit_entries').insert(rows);
            await trx.raw('PRAGMA ignore_check_constraints = OFF');
          });
        } else {
          await store.knex.raw('ALTER TABLE audit_entries DROP CONSTRAINT audit_entries_seq_check');
          await store.knex('audit_entries').insert(rows);
        }
      } finally {
        await store.close();
      }

      const listed = await json('audit', 'list', '--kind', 'api_key_revoked', '--all');
      expect(listed.data.map((e: { id: string }) => e.id), 'the runbook confirmation step shows no forged revocation').to.not.include(FORGED);
      const exported = await cli('audit', 'export', '--format', 'jsonl');
      expect(exported.code, exported.stderr).to.equal(0);
      expect(exported.stdout).to.not.include(FORGED);
      expect(exported.stdout).to.not.include(FORGED_ELSEWHERE);

      const verified = await cli('audit', 'verify', '--json');
      expect(verified.code, verified.stdout).to.equal(1);
      const report = JSON.parse(verified.stdout);
      const of = (id: string) => report.organisations.find((r: { organisation_id: string }) => r.organisation_id === id);
      expect(of(org.id).broken).to.include({ seq: 0, reason: 'entry_outside_chain' });
      expect(of(org.id).broken.message).to.include(FORGED);
      expect(of(NO_CHAIN_ORG), 'an organisation whose only row is outside any chain is still gone through').to.deep.include({ status: 'broken', entries: 0 });
      expect(of(NO_CHAIN_ORG).broken.message).to.include(FORGED_ELSEWHERE);

      const human = await cli('audit', 'verify', '--org', org.id);
      expect(human.code).to.equal(1);
      expect(human.stdout).to.include(`${org.id}  BROKEN at seq 0: entry_outside_chain (1 row is outside the chain`);

      const checked = await cli('audit', 'verify', '--checkpoint', 'before.json', '--public-key', 'public.pem');
      expect(checked.code, checked.stdout).to.equal(1);
      expect(checked.stdout).to.include(`${org.id}  BROKEN at seq 0: entry_outside_chain`);
    });
  });
}

for (const target of databaseTargets()) {
  describe(`cos-admin migrate on a ${target.name} database already holding rows outside the chain (C-120)`, function () {
    this.timeout(60_000);
    const suite = suiteDatabase(target);
    const { cli } = suite;

    it('C-120: migrate names the rows, exits 1 and changes nothing; once they are removed it migrates', async () => {
      const store = createSqlStore({ databaseUrl: suite.db.databaseUrl });
      const source = { migrationSource: sqlMigrationSource(store.dialect), tableName: MIGRATIONS_TABLE };
      try {
        const before = MIGRATIONS.findIndex((m) => m.name === '0014_audit_seq_checks');
        for (let i = 0; i < before; i++) await store.knex.migrate.up(source);
        await store.knex('audit_entries').insert({
          id: FORGED,
          kind: 'api_key_revoked',
          occurred_at: Date.now(),
          organisation_id: NO_CHAIN_ORG,
          key_id: null,
          key_prefix: null,
          actor_type: 'operator',
          actor_key_id: null,
          actor_name: 'security-team',
          seq: 0,
          prev_hash: '0'.repeat(64),
          hash: '0'.repeat(64),
        });
      } finally {
        await store.close();
      }
      const refused = await cli('migrate');
      expect(refused.code, refused.stdout).to.equal(1);
      expect(refused.stderr).to.include('0014_audit_seq_checks refused: audit_entries holds 1 row(s) outside the hash chain');
      expect(refused.stderr).to.include(FORGED);
      const check = createSqlStore({ databaseUrl: suite.db.databaseUrl });
      try {
        expect(await check.pendingMigrations()).to.deep.equal(['0014_audit_seq_checks', '0015_organisation_rate_limit', '0016_key_usage', '0017_key_metadata_cidrs', '0018_expiry_notices', '0019_key_rate_limit']);
        expect(await check.knex('audit_entries').where({ id: FORGED }).first(), 'the row is kept: it is evidence').to.not.equal(undefined);
        await check.knex('audit_entries').where({ id: FORGED }).delete();
      } finally {
        await check.close();
      }
      const migrated = await cli('migrate');
      expect(migrated.code, migrated.stderr).to.equal(0);
    });
  });
}
