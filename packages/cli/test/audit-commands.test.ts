/**
 * `cos-admin`, run in process (C-63): every writing command records the operator named by
 * `--actor` on its audit entries; `audit verify` exits 0 / 1 and says where a chain broke;
 * `audit checkpoint` writes a signed checkpoint that `audit verify --checkpoint` checks; `audit
 * export --format jsonl` writes a file that `audit verify --file` verifies without a database.
 */
import { generateKeyPairSync } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { createSqlStore } from '@cos/store-sql';
import { runCli } from './support/cli.js';
import { databaseTargets, suiteDatabase } from './support/databases.js';

for (const target of databaseTargets()) {
  describe(`cos-admin audit on ${target.name} (C-63)`, function () {
    this.timeout(60_000);
    const suite = suiteDatabase(target);
    const { cli, json } = suite;

    before(async () => {
      expect((await cli('migrate')).code).to.equal(0);
    });

    it('C-63, C-40: every writing command records the --actor name on its entries (key roll included)', async () => {
      const boot = await json('bootstrap', '--actor', 'boot-op');
      const system = boot.organisation.id as string;
      const org = await json('org', 'create', '--name', 'Audited', '--slug', 'audited', '--actor', 'create-op');
      await json('org', 'classify', org.id, '--section', 'K', '--actor', 'classify-op');
      const member = await json('member', 'add', org.id, '--email', 'someone@example.com', '--actor', 'add-op');
      expect((await cli('member', 'remove', org.id, member.id, '--actor', 'remove-op')).code).to.equal(0);
      const issued = await json('key', 'issue', org.id, '--label', 'k', '--actor', 'issue-op');
      const rolled = await json('--actor', 'roll-op', 'key', 'roll', org.id, issued.id);
      await json('key', 'revoke', org.id, rolled.id, '--actor', 'revoke-op');

      const log = await json('audit', 'list', '--all');
      // In chain order: `audit list` orders by time, and a roll writes two entries at the same instant.
      const names = (orgId: string) =>
        log.data
          .filter((e: any) => e.organisation_id === orgId)
          .sort((a: any, b: any) => a.seq - b.seq)
          .map((e: any) => [e.kind, e.actor.name]);
      expect(names(system).every(([, name]: [string, string]) => name === 'boot-op'), JSON.stringify(names(system))).to.equal(true);
      expect(names(org.id)).to.deep.equal([
        ['organisation_created', 'create-op'],
        ['organisation_updated', 'classify-op'],
        ['member_added', 'add-op'],
        ['member_removed', 'remove-op'],
        ['api_key_issued', 'issue-op'],
        ['api_key_rolled', 'roll-op'],
        ['api_key_revoked', 'roll-op'],
        ['api_key_revoked', 'revoke-op'],
      ]);
      expect(JSON.stringify(log), 'no e-mail address in the audit log').to.not.include('someone@example.com');
      for (const e of log.data) expect(e.seq).to.be.a('number');
    });

    it('C-63: checkpoint writes a signed checkpoint (never over a file) that verify --checkpoint checks; export --format jsonl verifies alone with --file, without a database', async () => {
      const { privateKey, publicKey } = generateKeyPairSync('ed25519');
      writeFileSync(join(suite.db.cwd, 'private.pem'), privateKey.export({ type: 'pkcs8', format: 'pem' }));
      writeFileSync(join(suite.db.cwd, 'public.pem'), publicKey.export({ type: 'spki', format: 'pem' }));
      const org = await json('org', 'create', '--name', 'Checkpointed', '--slug', 'checkpointed');
      const cp = await json('audit', 'checkpoint', '--key', 'private.pem', '--out', 'checkpoint.json');
      expect(cp.out).to.equal('checkpoint.json');
      const checkpoint = JSON.parse(readFileSync(join(suite.db.cwd, 'checkpoint.json'), 'utf8'));
      expect(checkpoint.heads.find((h: any) => h.organisation_id === org.id).seq).to.equal(1);
      expect((await cli('audit', 'checkpoint', '--key', 'private.pem', '--out', 'checkpoint.json')).code, 'never overwrites').to.equal(1);
      await json('key', 'issue', org.id, '--label', 'after the checkpoint');
      const extends_ = await cli('audit', 'verify', '--checkpoint', 'checkpoint.json', '--public-key', 'public.pem');
      expect(extends_.code, extends_.stderr).to.equal(0);
      expect(extends_.stdout).to.include(`${org.id}  ok (2 entries, head seq 2, extends the checkpoint)`);

      const exported = await cli('audit', 'export', '--format', 'jsonl', '--org', org.id);
      expect(exported.code, exported.stderr).to.equal(0);
      expect(exported.stdout.trim().split('\n').map((l) => [JSON.parse(l).seq, JSON.parse(l).kind])).to.deep.equal([
        [1, 'organisation_created'],
        [2, 'api_key_issued'],
      ]);
      expect((await cli('audit', 'export', '--format', 'jsonl', '--out', 'all.jsonl')).code).to.equal(0);
      const offline = await runCli(['audit', 'verify', '--file', 'all.jsonl', '--checkpoint', 'checkpoint.json', '--public-key', 'public.pem'], {}, suite.db.cwd);
      expect(offline.code, `no DATABASE_URL needed: ${offline.stderr}`).to.equal(0);
    });

    it('C-63: verify exits 0 when every chain holds and 1 with the broken seq after a direct UPDATE (--json and text)', async () => {
      const org = await json('org', 'create', '--name', 'Verified', '--slug', 'verified');
      await json('key', 'issue', org.id, '--label', 'one');
      const ok = await cli('audit', 'verify', '--json');
      expect(ok.code, ok.stderr).to.equal(0);
      const report = JSON.parse(ok.stdout);
      expect(report.status).to.equal('ok');
      expect(report.organisations.find((r: any) => r.organisation_id === org.id)).to.deep.include({ status: 'ok', entries: 2 });
      const human = await cli('audit', 'verify', '--org', org.id);
      expect(human.stdout).to.match(new RegExp(`^${org.id}  ok \\(2 entries, head seq 2\\)\\nThe 1 chain holds\\.\\n$`));

      const store = createSqlStore({ databaseUrl: suite.db.databaseUrl });
      try {
        await store.knex('audit_entries').where({ organisation_id: org.id, seq: 2 }).update({ key_prefix: 'svc_live_Zzz' });
      } finally {
        await store.close();
      }
      const broken = await cli('audit', 'verify', '--json');
      expect(broken.code).to.equal(1);
      const brokenReport = JSON.parse(broken.stdout);
      expect(brokenReport.status).to.equal('broken');
      expect(brokenReport.organisations.find((r: any) => r.organisation_id === org.id).broken).to.include({ seq: 2, reason: 'entry_changed' });
      const brokenHuman = await cli('audit', 'verify', '--org', org.id);
      expect(brokenHuman.code).to.equal(1);
      expect(brokenHuman.stdout).to.include(`${org.id}  BROKEN at seq 2: entry_changed`);
    });

    it('C-121: a lone surrogate in --actor and --name is recorded as U+FFFD, and the chain still verifies (what is hashed is what is stored)', async () => {
      const org = await json('org', 'create', '--name', 'Half \ud800 pair', '--slug', 'half-pair', '--actor', 'op \udc00');
      expect(org.name).to.equal('Half \ufffd pair');
      const log = await json('audit', 'list', '--org', org.id, '--all');
      expect(log.data.map((e: any) => e.actor.name)).to.deep.equal(['op \ufffd']);
      const verified = await cli('audit', 'verify', '--org', org.id);
      expect(verified.code, verified.stdout).to.equal(0);
    });

    it('C-63: wrong command lines exit 2: --checkpoint without --public-key, an unknown format, a bad --since or --org', async () => {
      expect((await cli('audit', 'verify', '--checkpoint', 'checkpoint.json')).code).to.equal(2);
      expect((await cli('audit', 'export', '--format', 'csv')).code).to.equal(2);
      expect((await cli('audit', 'export', '--format', 'jsonl', '--since', 'yesterday')).code).to.equal(2);
      expect((await cli('audit', 'verify', '--org', 'acme')).code).to.equal(2);
    });
  });
}
