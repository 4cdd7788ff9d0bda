/**
 * Migrations that are not expand-only declare it (`breaking`, with the reason, in their own
 * definition) and are applied to a database in use only with `cos-admin migrate --allow-breaking`:
 * during a rolling upgrade the previous release still serves on the schema being migrated.
 */
import { expect } from 'chai';
import { MIGRATIONS, type SqlMigration } from '@cos/store-sql';
import { breakingMigrationsMessage, breakingPending } from '../src/runtime.js';
import { runCli } from './support/cli.js';
import { databaseTargets, suiteDatabase } from './support/databases.js';

const migration = (name: string, breaking?: string): SqlMigration => ({ name, statements: () => [], ...(breaking === undefined ? {} : { breaking }) });
const LIST = [migration('0001_a'), migration('0002_drop_old_column', 'drops organisations.legacy, which 0.1 reads'), migration('0003_c')];

describe('C-186: a migration that is not expand-only is applied only with --allow-breaking', () => {
  it('breakingPending names the pending migrations marked breaking, with their reasons, on a database in use', () => {
    expect(breakingPending(['0002_drop_old_column', '0003_c'], LIST)).to.deep.equal([{ name: '0002_drop_old_column', reason: 'drops organisations.legacy, which 0.1 reads' }]);
    expect(breakingPending(['0003_c'], LIST)).to.deep.equal([]);
    expect(breakingPending([], LIST)).to.deep.equal([]);
  });

  it('a database with no migration applied yet has no previous release reading it: nothing there is breaking', () => {
    expect(breakingPending(['0001_a', '0002_drop_old_column', '0003_c'], LIST)).to.deep.equal([]);
  });

  it('the refusal says which migration, why, and what to do', () => {
    const message = breakingMigrationsMessage(breakingPending(['0002_drop_old_column', '0003_c'], LIST));
    expect(message).to.equal(
      'a pending migration is not expand-only: 0002_drop_old_column (drops organisations.legacy, which 0.1 reads); instances of the previous release cannot run on the migrated schema. Stop them all, then run `cos-admin migrate --allow-breaking`',
    );
  });

  it('every migration shipped so far is expand-only: an upgrade between the releases made of them needs no flag', () => {
    expect(MIGRATIONS.filter((m) => m.breaking !== undefined).map((m) => m.name)).to.deep.equal([]);
    expect(breakingPending(MIGRATIONS.slice(6).map((m) => m.name))).to.deep.equal([]);
  });

  for (const target of databaseTargets()) {
    describe(`cos-admin migrate --allow-breaking on ${target.name}`, () => {
      const suite = suiteDatabase(target);

      it('is accepted and applies the pending migrations; `migrate --help` documents it', async () => {
        const first = await suite.cli('migrate', '--allow-breaking', '--json');
        expect(first.code, first.stderr).to.equal(0);
        expect((JSON.parse(first.stdout) as { applied: string[] }).applied).to.deep.equal(MIGRATIONS.map((m) => m.name));
        const again = await suite.cli('migrate', '--json');
        expect(JSON.parse(again.stdout)).to.deep.include({ applied: [] });
        const help = await runCli(['migrate', '--help'], {}, suite.db.cwd);
        expect(help.stdout).to.match(/--allow-breaking +also apply a migration that is not expand-only/);
      });
    });
  }
});
