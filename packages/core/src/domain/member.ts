/** Member record (C-21). Members are managed by operators through the CLI. */
export interface Member {
  readonly id: string;
  readonly organisationId: string;
  /** Stored as given after trimming; compared case-insensitively for uniqueness within an organisation. */
  readonly email: string;
  readonly createdAt: Date;
}

export const EMAIL_MAX = 254;
/** A pragmatic address check: one '@', no spaces, a dot in the domain. */
export const EMAIL_PATTERN = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;
