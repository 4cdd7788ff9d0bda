import { expect } from 'chai';
import {
  ConflictError,
  ForbiddenError,
  ISSUE_NOTIFICATION_STATUS,
  ISSUE_WEBHOOK_URL,
  NOTIFICATION_DELIVERED_MESSAGE,
  NotFoundError,
  OPERATOR,
  OPERATOR_REQUIRED_MESSAGE,
  ValidationError,
  WEBHOOK_NOT_FOUND_MESSAGE,
} from '@cos/core';
import { StaticHostResolver } from '@cos/core/testing';
import { UNKNOWN_UUID, fixture, rejectsWith } from './use-cases-fixtures.js';

const PRIVATE_HINT = '; WEBHOOK_ALLOW_PRIVATE=true (development and tests only) allows it';
const HTTP_ISSUE = 'http:// is not allowed, only https://; WEBHOOK_ALLOW_HTTP=true allows it';

describe('use case: webhooks and the outbox (C-59)', () => {
  it('C-59: set makes an endpoint with a new whsec_ secret shown once; changing the URL keeps the secret; rotate makes a new one', async () => {
    const f = fixture();
    const org = await f.org('acme');
    const first = await f.core.webhooks.set(OPERATOR, org.id, 'https://hooks.acme.example/cos');
    expect(first.newSecret).to.match(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(Buffer.from(first.newSecret!.slice(6), 'base64')).to.have.length(32);
    expect(first.endpoint).to.deep.include({ organisationId: org.id, url: 'https://hooks.acme.example/cos', secret: first.newSecret });
    f.clock.advance(1000);
    const moved = await f.core.webhooks.set(OPERATOR, org.id, 'https://hooks.acme.example/v2');
    expect(moved.newSecret).to.equal(null);
    expect(moved.endpoint.secret).to.equal(first.newSecret);
    expect(moved.endpoint.createdAt).to.deep.equal(first.endpoint.createdAt);
    expect(moved.endpoint.updatedAt.getTime()).to.equal(first.endpoint.updatedAt.getTime() + 1000);
    const rotated = await f.core.webhooks.rotateSecret(OPERATOR, org.id);
    expect(rotated.newSecret).to.match(/^whsec_/).and.not.to.equal(first.newSecret);
    expect((await f.core.webhooks.show(OPERATOR, org.id)).secret).to.equal(rotated.newSecret);
    await f.core.webhooks.remove(OPERATOR, org.id);
    expect((await rejectsWith(f.core.webhooks.show(OPERATOR, org.id), NotFoundError)).message).to.equal(WEBHOOK_NOT_FOUND_MESSAGE);
    await rejectsWith(f.core.webhooks.remove(OPERATOR, org.id), NotFoundError);
    await rejectsWith(f.core.webhooks.rotateSecret(OPERATOR, org.id), NotFoundError);
  });

  it('C-59: the URL must be absolute http(s), at most 2048 characters, without fragment, user or password; nothing is stored otherwise', async () => {
    const f = fixture();
    const org = await f.org('acme');
    for (const url of ['ftp://x.example/h', 'not a url', '/relative', 'https://x.example/h#frag', 'https://user:pw@x.example/h', `https://x.example/${'a'.repeat(2048)}`, 42, '']) {
      const e = await rejectsWith(f.core.webhooks.set(OPERATOR, org.id, url), ValidationError);
      expect(e.details, String(url)).to.deep.equal([{ field: 'url', issue: ISSUE_WEBHOOK_URL }]);
    }
    expect(await f.store.stores.webhooks.get(org.id)).to.equal(null);
    await rejectsWith(f.core.webhooks.set(OPERATOR, UNKNOWN_UUID, 'https://x.example/h'), NotFoundError);
  });

  it('C-59 (SSRF): set refuses every internal destination (each form of the issue, other special ranges, internal names) with a detail saying why; nothing is stored', async () => {
    const f = fixture();
    const org = await f.org('acme');
    const refused: Array<[string, string]> = [
      ['https://localhost/hook', `host localhost is an internal name${PRIVATE_HINT}`],
      ['https://LOCALHOST./hook', `host localhost is an internal name${PRIVATE_HINT}`],
      ['https://127.1/hook', `address 127.0.0.1 is not allowed (loopback)${PRIVATE_HINT}`],
      ['https://2130706433/hook', `address 127.0.0.1 is not allowed (loopback)${PRIVATE_HINT}`],
      ['https://0x7f.1/hook', `address 127.0.0.1 is not allowed (loopback)${PRIVATE_HINT}`],
      ['https://0.0.0.0/hook', 'address 0.0.0.0 is not allowed (unspecified)'],
      ['https://[::1]/hook', `address ::1 is not allowed (loopback)${PRIVATE_HINT}`],
      ['https://[::ffff:127.0.0.1]/hook', `address ::ffff:7f00:1 is not allowed (loopback: IPv4-mapped 127.0.0.1)${PRIVATE_HINT}`],
      // the service's own API (HOST and PORT defaults)
      ['https://127.0.0.1:3000/v1/organisations', `address 127.0.0.1 is not allowed (loopback)${PRIVATE_HINT}`],
      ['https://169.254.169.254/latest/meta-data/', `address 169.254.169.254 is not allowed (link-local)${PRIVATE_HINT}`],
      ['https://10.0.0.1/hook', `address 10.0.0.1 is not allowed (private)${PRIVATE_HINT}`],
      ['https://[fd00::1]/hook', `address fd00::1 is not allowed (unique-local)${PRIVATE_HINT}`],
      ['https://metadata.google.internal/computeMetadata/v1/', `host metadata.google.internal is an internal name${PRIVATE_HINT}`],
      ['https://127.0.0.1:6379/', `address 127.0.0.1 is not allowed (loopback)${PRIVATE_HINT}`],
      ['https://172.16.5.4/hook', `address 172.16.5.4 is not allowed (private)${PRIVATE_HINT}`],
      ['https://192.168.1.1/hook', `address 192.168.1.1 is not allowed (private)${PRIVATE_HINT}`],
      ['https://100.64.0.1/hook', `address 100.64.0.1 is not allowed (shared address space)${PRIVATE_HINT}`],
      ['https://[fe80::1]/hook', `address fe80::1 is not allowed (link-local)${PRIVATE_HINT}`],
      ['https://[::]/hook', 'address :: is not allowed (unspecified)'],
      ['https://224.0.0.1/hook', 'address 224.0.0.1 is not allowed (multicast)'],
      ['https://[ff02::1]/hook', 'address ff02::1 is not allowed (multicast)'],
      ['https://255.255.255.255/hook', 'address 255.255.255.255 is not allowed (broadcast)'],
      ['https://192.0.2.10/hook', 'address 192.0.2.10 is not allowed (documentation)'],
      ['https://240.0.0.1/hook', 'address 240.0.0.1 is not allowed (reserved)'],
      ['https://[::127.0.0.1]/hook', `address ::7f00:1 is not allowed (loopback: IPv4-compatible 127.0.0.1)${PRIVATE_HINT}`],
      ['https://[64:ff9b::10.0.0.1]/hook', `address 64:ff9b::a00:1 is not allowed (private: NAT64 10.0.0.1)${PRIVATE_HINT}`],
      ['https://[2002:a9fe:a9fe::1]/hook', `address 2002:a9fe:a9fe::1 is not allowed (link-local: 6to4 169.254.169.254)${PRIVATE_HINT}`],
      ['https://[2001::1]/hook', 'address 2001::1 is not allowed (reserved)'],
      ['https://api.localhost/hook', `host api.localhost is an internal name${PRIVATE_HINT}`],
      ['https://printer.local/hook', `host printer.local is an internal name${PRIVATE_HINT}`],
      ['https://intranet/hook', `host intranet is a single-label (local network) name${PRIVATE_HINT}`],
      ['http://hooks.acme.example/cos', HTTP_ISSUE],
    ];
    for (const [url, issue] of refused) {
      const e = await rejectsWith(f.core.webhooks.set(OPERATOR, org.id, url), ValidationError);
      expect(e.details, url).to.deep.equal([{ field: 'url', issue }]);
    }
    expect(await f.store.stores.webhooks.get(org.id)).to.equal(null);
    // Public destinations, including IPv6 and IPv4 forms of public addresses, are accepted.
    for (const url of ['https://93.184.215.14/hook', 'https://[2606:4700:4700::1111]/hook', 'https://[::ffff:8.8.8.8]/hook', 'https://[64:ff9b::8.8.8.8]/hook', 'https://172.32.0.1/hook']) {
      expect((await f.core.webhooks.set(OPERATOR, org.id, url)).endpoint.url, url).to.equal(new URL(url).href);
    }
  });

  it('C-59 (SSRF): WEBHOOK_ALLOW_HTTP allows http://, WEBHOOK_ALLOW_PRIVATE loopback, private and internal names; neither allows unspecified, multicast or broadcast', async () => {
    const httpOnly = fixture({ config: { webhookAllowHttp: true } });
    const a = await httpOnly.org('acme');
    expect((await httpOnly.core.webhooks.set(OPERATOR, a.id, 'http://hooks.acme.example/cos')).endpoint.url).to.equal('http://hooks.acme.example/cos');
    expect((await rejectsWith(httpOnly.core.webhooks.set(OPERATOR, a.id, 'http://127.0.0.1:8080/hook'), ValidationError)).details).to.deep.equal([
      { field: 'url', issue: `address 127.0.0.1 is not allowed (loopback)${PRIVATE_HINT}` },
    ]);

    const privateOnly = fixture({ config: { webhookAllowPrivate: true } });
    const b = await privateOnly.org('acme');
    expect((await rejectsWith(privateOnly.core.webhooks.set(OPERATOR, b.id, 'http://127.0.0.1:8080/hook'), ValidationError)).details).to.deep.equal([
      { field: 'url', issue: HTTP_ISSUE },
    ]);

    const local = fixture({ config: { webhookAllowHttp: true, webhookAllowPrivate: true } });
    const c = await local.org('acme');
    for (const url of ['http://127.0.0.1:8080/hook', 'http://localhost:8080/hook', 'https://10.0.0.1/hook', 'https://[::1]:8443/hook', 'https://metadata.google.internal/x', 'http://receiver/hook']) {
      expect((await local.core.webhooks.set(OPERATOR, c.id, url)).endpoint.url, url).to.equal(new URL(url).href);
    }
    for (const url of ['http://0.0.0.0:8080/hook', 'http://224.0.0.1/hook', 'http://255.255.255.255/hook', 'http://[::]:8080/hook']) {
      await rejectsWith(local.core.webhooks.set(OPERATOR, c.id, url), ValidationError);
    }
  });

  it('C-59 (SSRF): with a host resolver, a name that resolves to any internal address is refused; a public or not (yet) resolving name is accepted; literal addresses are not resolved', async () => {
    const hosts = new StaticHostResolver({
      'hooks.acme.example': ['93.184.215.14', '2606:2800:21f:cb07:6820:80da:af6b:8b2c'],
      'inside.acme.example': ['10.1.2.3'],
      'mixed.acme.example': ['93.184.215.14', '::1'],
      'metadata.acme.example': ['169.254.169.254'],
      'zero.acme.example': ['0.0.0.0'],
    });
    const f = fixture({ webhookHosts: hosts });
    const org = await f.org('acme');
    const refused: Array<[string, string]> = [
      ['https://inside.acme.example/hook', `address 10.1.2.3 of inside.acme.example is not allowed (private)${PRIVATE_HINT}`],
      ['https://mixed.acme.example/hook', `address ::1 of mixed.acme.example is not allowed (loopback)${PRIVATE_HINT}`],
      ['https://metadata.acme.example/hook', `address 169.254.169.254 of metadata.acme.example is not allowed (link-local)${PRIVATE_HINT}`],
    ];
    for (const [url, issue] of refused) {
      expect((await rejectsWith(f.core.webhooks.set(OPERATOR, org.id, url), ValidationError)).details, url).to.deep.equal([{ field: 'url', issue }]);
    }
    expect(await f.store.stores.webhooks.get(org.id)).to.equal(null);
    await f.core.webhooks.set(OPERATOR, org.id, 'https://hooks.acme.example/cos');
    await f.core.webhooks.set(OPERATOR, org.id, 'https://later.acme.example/cos');
    await f.core.webhooks.set(OPERATOR, org.id, 'https://93.184.215.14/cos');
    expect(hosts.calls).to.deep.equal(['inside.acme.example', 'mixed.acme.example', 'metadata.acme.example', 'hooks.acme.example', 'later.acme.example']);
    expect((await f.core.webhooks.show(OPERATOR, org.id)).url).to.equal('https://93.184.215.14/cos');
    // With private destinations allowed, a name resolving inside is accepted; one resolving to 0.0.0.0 still is not.
    const local = fixture({ webhookHosts: hosts, config: { webhookAllowPrivate: true } });
    const other = await local.org('globex');
    await local.core.webhooks.set(OPERATOR, other.id, 'https://inside.acme.example/hook');
    expect((await rejectsWith(local.core.webhooks.set(OPERATOR, other.id, 'https://zero.acme.example/hook'), ValidationError)).details).to.deep.equal([
      { field: 'url', issue: 'address 0.0.0.0 of zero.acme.example is not allowed (unspecified)' },
    ]);
    expect(hosts.calls.slice(5)).to.deep.equal(['inside.acme.example', 'zero.acme.example']);
    expect((await local.core.webhooks.show(OPERATOR, other.id)).url).to.equal('https://inside.acme.example/hook');
  });

  it('C-59, C-60: the outbox is operator-only; a key manages its own organisation\'s endpoint only, with webhooks:read / webhooks:write', async () => {
    const f = fixture();
    const platform = await f.platform();
    const tenant = await f.tenant('acme');
    const other = await f.org('globex');
    for (const principal of [platform.principal, tenant.principal]) {
      await rejectsWith(f.core.notifications.list(principal, {}), ForbiddenError);
      await rejectsWith(f.core.notifications.retry(principal, UNKNOWN_UUID), ForbiddenError);
      expect((await rejectsWith(f.core.webhooks.reencryptSecrets(principal), ForbiddenError)).message).to.equal(OPERATOR_REQUIRED_MESSAGE);
    }
    await rejectsWith(f.core.webhooks.set(tenant.principal, other.id, 'https://x.example/h'), ForbiddenError);
    await rejectsWith(f.core.webhooks.show(tenant.principal, other.id), ForbiddenError);
    const readOnly = { ...tenant.principal, scopes: ['webhooks:read'] };
    const refused = await rejectsWith(f.core.webhooks.set(readOnly, tenant.org.id, 'https://x.example/h'), ForbiddenError);
    expect(refused.details).to.deep.equal([{ field: 'scope', issue: 'requires webhooks:write' }]);
    const writeOnly = { ...tenant.principal, scopes: ['webhooks:write'] };
    expect((await f.core.webhooks.set(writeOnly, tenant.org.id, 'https://x.example/h')).newSecret).to.match(/^whsec_/);
    expect((await rejectsWith(f.core.webhooks.show(writeOnly, tenant.org.id), ForbiddenError)).details).to.deep.equal([{ field: 'scope', issue: 'requires webhooks:read' }]);
    expect((await f.core.webhooks.show(readOnly, tenant.org.id)).url).to.equal('https://x.example/h');
    expect((await f.core.webhooks.show(platform.principal, tenant.org.id)).url).to.equal('https://x.example/h');
  });

  it('C-59: redeliver makes a failed delivery due again under its id and sends a delivered one again under a new id; another organisation\'s is 404', async () => {
    const f = fixture();
    const tenant = await f.tenant('acme');
    const other = await f.tenant('globex');
    await f.core.webhooks.set(OPERATOR, tenant.org.id, 'https://hooks.acme.example/cos');
    await f.core.webhooks.set(OPERATOR, other.org.id, 'https://hooks.globex.example/cos');
    const ping = await f.core.webhooks.ping(tenant.principal, tenant.org.id);
    const { outbox } = f.store.stores;
    const now = f.clock.now();
    await outbox.claimDue(now, new Date(now.getTime() + 60_000), 10, 'lease');
    await outbox.complete(ping.id, 'lease', { status: 'delivered', at: now });
    const again = await f.core.webhooks.redeliver(tenant.principal, tenant.org.id, ping.id);
    expect(again.id).to.not.equal(ping.id);
    expect(again).to.include({ organisationId: tenant.org.id, type: 'ping', status: 'pending', attempts: 0, payload: ping.payload });
    expect((await outbox.findById(ping.id))?.status).to.equal('delivered');
    await rejectsWith(f.core.webhooks.redeliver(other.principal, other.org.id, ping.id), NotFoundError);
    await rejectsWith(f.core.webhooks.redeliver(tenant.principal, other.org.id, ping.id), ForbiddenError);
  });

  it('C-59: issuing and revoking a key of an organisation with an endpoint enqueue api_key.issued and api_key.revoked; a second revocation enqueues nothing', async () => {
    const f = fixture();
    const org = await f.org('acme');
    await f.core.webhooks.set(OPERATOR, org.id, 'https://hooks.acme.example/cos');
    const issued = await f.core.apiKeys.issue(OPERATOR, org.id, { label: 'deploy' });
    await f.core.apiKeys.revoke(OPERATOR, org.id, issued.key.id);
    await f.core.apiKeys.revoke(OPERATOR, org.id, issued.key.id);
    const page = await f.core.notifications.list(OPERATOR, { org: org.id });
    expect(page.items.map((n) => n.type)).to.have.members(['api_key.issued', 'api_key.revoked']);
    expect(page.items).to.have.length(2);
    for (const n of page.items) {
      expect(JSON.parse(n.payload)).to.deep.equal({
        type: n.type,
        timestamp: f.clock.now().toISOString(),
        data: { organisation_id: org.id, key_id: issued.key.id, key_prefix: issued.key.keyPrefix, label: 'deploy', cause: { type: 'operator' } },
      });
      expect(n.payload).not.to.include(issued.rawKey).and.not.to.include(issued.key.digest);
    }
  });

  it('C-59: list filters by organisation and status (400 for a bad status or org), retry makes a failed notification due again, a delivered one is 409', async () => {
    const f = fixture();
    const a = await f.org('acme');
    const b = await f.org('globex');
    for (const org of [a, b]) {
      await f.core.webhooks.set(OPERATOR, org.id, 'https://hooks.example/cos');
      await f.core.apiKeys.issue(OPERATOR, org.id, { label: 'k' });
    }
    expect((await f.core.notifications.list(OPERATOR, { org: a.id })).items.map((n) => n.organisationId)).to.deep.equal([a.id]);
    const bad = await rejectsWith(f.core.notifications.list(OPERATOR, { status: 'lost', org: 'x' }), ValidationError);
    expect(bad.details).to.deep.equal([
      { field: 'org', issue: 'must be a UUID' },
      { field: 'status', issue: ISSUE_NOTIFICATION_STATUS },
    ]);
    const outbox = f.store.stores.outbox;
    const [na, nb] = await outbox.claimDue(f.clock.now(), new Date(f.clock.now().getTime() + 1000), 10, 'c');
    await outbox.complete(na!.id, 'c', { status: 'failed', at: f.clock.now(), error: 'answered 500' });
    await outbox.complete(nb!.id, 'c', { status: 'delivered', at: f.clock.now() });
    expect((await f.core.notifications.list(OPERATOR, { status: 'failed' })).items.map((n) => n.id)).to.deep.equal([na!.id]);
    f.clock.advance(5000);
    const retried = await f.core.notifications.retry(OPERATOR, na!.id.toUpperCase());
    expect(retried).to.deep.include({ id: na!.id, status: 'pending', attempts: 0 });
    expect(retried.nextAttemptAt).to.deep.equal(f.clock.now());
    const e = await rejectsWith(f.core.notifications.retry(OPERATOR, nb!.id), ConflictError);
    expect(e.message).to.equal(NOTIFICATION_DELIVERED_MESSAGE);
    await rejectsWith(f.core.notifications.retry(OPERATOR, UNKNOWN_UUID), NotFoundError);
    expect((await rejectsWith(f.core.notifications.retry(OPERATOR, "nope"), ValidationError)).details).to.deep.equal([{ field: 'id', issue: 'must be a UUID' }]);
  });
});
