/** DATABASE_URL (contract "Operator interface"): sqlite:<path>, sqlite::memory:, postgres://… */
import { parseDatabaseUrl, redactDatabaseUrl } from '@cos/store-sql';
import { expect } from 'chai';

function errorOf(url: string): Error {
  try {
    parseDatabaseUrl(url);
  } catch (e) {
    return e as Error;
  }
  throw new Error(`expected ${url} to be rejected`);
}

describe('parseDatabaseUrl', () => {
  it('accepts the default sqlite:./data/cos.sqlite', () => {
    expect(parseDatabaseUrl('sqlite:./data/cos.sqlite')).to.deep.equal({ dialect: 'sqlite', filename: './data/cos.sqlite', memory: false });
  });

  it('accepts sqlite::memory:', () => {
    expect(parseDatabaseUrl('sqlite::memory:')).to.deep.equal({ dialect: 'sqlite', filename: ':memory:', memory: true });
  });

  it('accepts absolute paths, with or without the // authority form', () => {
    expect(parseDatabaseUrl('sqlite:/var/lib/cos/cos.sqlite')).to.include({ filename: '/var/lib/cos/cos.sqlite' });
    expect(parseDatabaseUrl('sqlite:///var/lib/cos/cos.sqlite')).to.include({ filename: '/var/lib/cos/cos.sqlite' });
    expect(parseDatabaseUrl('sqlite://./rel.sqlite')).to.include({ filename: './rel.sqlite' });
  });

  it('accepts postgres:// and postgresql:// URLs as given', () => {
    expect(parseDatabaseUrl('postgres://postgres@127.0.0.1:5432/test')).to.deep.equal({
      dialect: 'postgres',
      connectionString: 'postgres://postgres@127.0.0.1:5432/test',
    });
    expect(parseDatabaseUrl('postgresql://u:p@db.internal/cos?sslmode=require').dialect).to.equal('postgres');
  });

  it('rejects an empty value, naming DATABASE_URL', () => {
    expect(errorOf('').message).to.match(/^DATABASE_URL is empty/);
    expect(errorOf('   ').message).to.match(/DATABASE_URL/);
  });

  it('rejects an unsupported scheme, naming it and the accepted forms', () => {
    const e = errorOf('mysql://root@localhost/cos');
    expect(e.message).to.match(/DATABASE_URL scheme "mysql:" is not supported/);
    expect(e.message).to.match(/sqlite:<path>/);
    expect(errorOf('./data/cos.sqlite').message).to.match(/DATABASE_URL has no scheme/);
  });

  it('rejects sqlite: without a path', () => {
    expect(errorOf('sqlite:').message).to.match(/DATABASE_URL "sqlite:" names no database file/);
  });

  it('rejects a postgres URL without a database or host, and never echoes the password', () => {
    const noDb = errorOf('postgres://admin:s3cret@db.internal:5432/');
    expect(noDb.message).to.match(/names no database/);
    expect(noDb.message).not.to.include('s3cret');
    expect(noDb.message).to.include('admin:***@');
    expect(errorOf('postgres://admin:s3cret@:5432/cos').message).not.to.include('s3cret');
    const bad = errorOf('postgres://admin:s3cret@[::1/cos');
    expect(bad.message).to.match(/not a valid postgres:\/\/ URL/);
    expect(bad.message).not.to.include('s3cret');
  });

  it('redactDatabaseUrl hides only the password', () => {
    expect(redactDatabaseUrl('postgres://u:pw@h:1/d')).to.equal('postgres://u:***@h:1/d');
    expect(redactDatabaseUrl('postgres://u@h/d')).to.equal('postgres://u@h/d');
    expect(redactDatabaseUrl('sqlite:./x')).to.equal('sqlite:./x');
  });
});
