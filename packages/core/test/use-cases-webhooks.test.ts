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
import { UNKNOWN_UUID, fixture, rejectsWith } from './use-cases-fixtures.js';

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

  it('C-59: webhooks and notifications are operator-only: keys, even platform keys, get 403', async () => {
    const f = fixture();
    const platform = await f.platform();
    const tenant = await f.tenant('acme');
    for (const principal of [platform.principal, tenant.principal]) {
      const e = await rejectsWith(f.core.webhooks.set(principal, tenant.org.id, 'https://x.example/h'), ForbiddenError);
      expect(e.message).to.equal(OPERATOR_REQUIRED_MESSAGE);
      await rejectsWith(f.core.webhooks.show(principal, tenant.org.id), ForbiddenError);
      await rejectsWith(f.core.notifications.list(principal, {}), ForbiddenError);
      await rejectsWith(f.core.notifications.retry(principal, UNKNOWN_UUID), ForbiddenError);
    }
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
        data: { organisation_id: org.id, key_id: issued.key.id, key_prefix: issued.key.keyPrefix, label: 'deploy' },
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
