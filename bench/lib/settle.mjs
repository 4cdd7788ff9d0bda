// How long a bench on Redis waits after its fixtures before measuring: the credential cache neither
// trusts nor fills an organisation's keys while its hash slot is unsettled, and a slot this Redis
// never held data for is unsettled for the change bound (limiter-redis DEFAULT_CHANGE_BOUND_MS,
// 10 s) from the first credential change in it (the fixture's `key issue`). A new organisation
// usually lands in such a slot, so a bench that measured at once measured a store read per request
// for up to 10 s. Two seconds more cover the change's own round trips and the first fills.
export const SETTLE_MS = 12_000;

/** Milliseconds left until a slot first written at `since` (Date.now()) is settled. */
export function untilSettled(since) {
  return Math.max(0, since + SETTLE_MS - Date.now());
}
