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
 * Kept instead of zod's e-mail check: each of zod 4's patterns gets one of the two cases the test
 * of C-21 (core/test/domain.test.ts) pins wrong, `a@b.c` accepted and `a@b` refused
 * (docs/decisions/0019-member-email-pattern.md). validation/member.ts applies it with `.regex()`.
 */
export const EMAIL_PATTERN = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;
