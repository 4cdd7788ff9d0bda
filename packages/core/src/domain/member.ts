/** Member record (C-21). Members are managed by operators through the CLI. */
export interface Member {
  readonly id: string;
  readonly organisationId: string;
  /** Stored as given after trimming; compared case-insensitively for uniqueness within an organisation. */
  readonly email: string;
  readonly createdAt: Date;
}

export const EMAIL_MAX = 254;
/**
 * A pragmatic address check: one '@', no spaces, a dot in the domain.
 *
 * Kept instead of zod's e-mail check (issue 17): none of zod 4's patterns accepts this set, and
 * the test of C-21 in core/test/domain.test.ts pins two cases that rule each of them out. The
 * default `z.regexes.email` and `rfc5322Email` refuse `a@b.c` (a one-letter top-level label; the
 * default also international addresses such as `ü@ä.de`, `a#b@c.de` and `a@b.c1`, which members
 * added so far may have); `html5Email` and `unicodeEmail` accept `a@b` (no dot in the domain),
 * `unicodeEmail` even `a@.`. `z.email({ pattern: EMAIL_PATTERN })` would run this same regex
 * under another name: no shorter and no different, so validation/member.ts keeps `.regex()`.
 */
export const EMAIL_PATTERN = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;
