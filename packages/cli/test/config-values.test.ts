/**
 * Integer and true/false variables (operations guide, section 1): integers are plain decimal digits
 * in the variable's range; true/false variables take true/false, 1/0 or yes/no in any case;
 * CREDENTIAL_CACHE takes on/off. The parsing is zod's coercion (`z.coerce.number()`,
 * `z.stringbool()`); these cases pin that what those would take beyond the documented forms is
 * still refused with the one message naming the variable.
 */
import { expect } from 'chai';
import { loadConfig } from '../src/config.js';

const load = (env: Record<string, string>) => loadConfig({ DATABASE_URL: 'sqlite::memory:', ...env }, { envFile: false });

describe('configuration: integer and true/false values (Operator interface)', () => {
  it('integers: plain digits within the range, surrounding blanks ignored', () => {
    expect(load({ PORT: '0' }).port).to.equal(0);
    expect(load({ PORT: '065535' }).port).to.equal(65_535);
    expect(load({ PORT: ' 8080 ' }).port).to.equal(8080);
    expect(load({ RATE_LIMIT_PER_MINUTE: '2147483647' }).rateLimitPerMinute).to.equal(2_147_483_647);
    expect(load({ OPS_PORT: '0' }).opsPort).to.equal(0);
    expect(load({}).opsPort).to.equal(null);
  });

  it('integers: what Number() would also read (1e3, 0x10, 1.0, +5, -0, full-width digits) and out-of-range values are refused naming the variable', () => {
    for (const bad of ['1e3', '0x10', '0b1', '1.0', '1.5', '+5', '-0', '-1', '１', 'Infinity', '65536', '99999999999']) {
      expect(() => load({ PORT: bad }), bad).to.throw(/^invalid configuration: PORT must be an integer from 0 to 65535$/);
      expect(() => load({ OPS_PORT: bad }), bad).to.throw(/^invalid configuration: OPS_PORT must be an integer from 0 to 65535$/);
    }
    expect(() => load({ RATE_LIMIT_PER_MINUTE: '2147483648' })).to.throw(/^invalid configuration: RATE_LIMIT_PER_MINUTE must be an integer of at least 1$/);
    expect(() => load({ RATE_LIMIT_PER_MINUTE: '0' })).to.throw(/^invalid configuration: RATE_LIMIT_PER_MINUTE must be an integer of at least 1$/);
  });

  it('true/false: true/false, 1/0, yes/no in any case', () => {
    for (const [value, expected] of [['true', true], ['TRUE', true], ['1', true], ['Yes', true], ['false', false], ['False', false], ['0', false], ['NO', false]] as const) {
      expect(load({ TRUST_PROXY: value }).trustProxy, value).to.equal(expected);
    }
    for (const [value, expected] of [['on', true], ['ON', true], ['off', false], ['Off', false]] as const) {
      expect(load({ CREDENTIAL_CACHE: value }).credentialCache, value).to.equal(expected);
    }
  });

  it("true/false: zod's other default words (on/off, y/n, enabled/disabled) are refused naming the variable; CREDENTIAL_CACHE takes on/off only", () => {
    for (const bad of ['on', 'off', 'y', 'n', 'enabled', 'disabled', 'maybe', '2']) {
      expect(() => load({ TRUST_PROXY: bad }), bad).to.throw(/^invalid configuration: TRUST_PROXY must be true or false$/);
    }
    for (const bad of ['true', 'false', '1', '0', 'yes', 'no', 'enabled']) {
      expect(() => load({ CREDENTIAL_CACHE: bad }), bad).to.throw(/^invalid configuration: CREDENTIAL_CACHE must be on or off$/);
    }
  });

  it('REDIS_CLUSTER_NODES: seed nodes redis://host:port, comma-separated, instead of REDIS_URL; both set is a start-up error naming both; REDIS_MIN_REPLICAS_ACKED an integer from 0 to 16', () => {
    const c = load({ REDIS_CLUSTER_NODES: 'redis://127.0.0.1:7100, redis://127.0.0.1:7101' });
    expect(c.redisClusterNodes).to.deep.equal(['redis://127.0.0.1:7100', 'redis://127.0.0.1:7101']);
    expect(c.redisUrl).to.equal('cluster:redis://127.0.0.1:7100,redis://127.0.0.1:7101');
    expect(load({}).redisClusterNodes).to.equal(null);
    expect(() => load({ REDIS_URL: 'redis://127.0.0.1:6379', REDIS_CLUSTER_NODES: 'redis://127.0.0.1:7100' })).to.throw(/^invalid configuration: REDIS_URL and REDIS_CLUSTER_NODES are both set/);
    for (const bad of ['127.0.0.1:7100', 'redis://127.0.0.1', 'http://h:1', 'redis://h:1,,redis://h:2']) {
      expect(() => load({ REDIS_CLUSTER_NODES: bad }), bad).to.throw(/^invalid configuration: REDIS_CLUSTER_NODES must be a comma-separated list of redis:\/\/host:port/);
    }
    expect(load({}).redisMinReplicasAcked).to.equal(null);
    expect(load({ REDIS_MIN_REPLICAS_ACKED: '0' }).redisMinReplicasAcked).to.equal(0);
    expect(() => load({ REDIS_MIN_REPLICAS_ACKED: '17' })).to.throw(/^invalid configuration: REDIS_MIN_REPLICAS_ACKED must be an integer from 0 to 16$/);
  });
});
