/** Organisation record and its name/slug rules (C-13, C-20, C-24). */

export interface Organisation {
  readonly id: string;
  readonly name: string;
  readonly slug: string;
  readonly industrySection: NaceSection | null;
  readonly isSystem: boolean;
  /**
   * The organisation's own requests per UTC minute (its plan, set by a platform key), or null:
   * the service's default (RATE_LIMIT_PER_MINUTE) applies.
   */
  readonly rateLimitPerMinute: number | null;
  readonly createdAt: Date;
  readonly updatedAt: Date;
}

export const NAME_MAX = 200;
/** An organisation's own rate limit is a whole number of requests per minute in 1..RATE_LIMIT_MAX. */
export const RATE_LIMIT_MAX = 1_000_000;
export const SLUG_MAX = 63;
/** 1..63 of a-z, 0-9 and '-', not starting or ending with '-' (C-13). */
export const SLUG_PATTERN = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

/** NACE Rev. 2 sections (C-24), letter -> English title. */
export const NACE_SECTIONS = {
  A: 'Agriculture, forestry and fishing',
  B: 'Mining and quarrying',
  C: 'Manufacturing',
  D: 'Electricity, gas, steam and air conditioning supply',
  E: 'Water supply; sewerage, waste management and remediation activities',
  F: 'Construction',
  G: 'Wholesale and retail trade; repair of motor vehicles and motorcycles',
  H: 'Transportation and storage',
  I: 'Accommodation and food service activities',
  J: 'Information and communication',
  K: 'Financial and insurance activities',
  L: 'Real estate activities',
  M: 'Professional, scientific and technical activities',
  N: 'Administrative and support service activities',
  O: 'Public administration and defence; compulsory social security',
  P: 'Education',
  Q: 'Human health and social work activities',
  R: 'Arts, entertainment and recreation',
  S: 'Other service activities',
  T: 'Activities of households as employers; undifferentiated goods- and services-producing activities of households for own use',
  U: 'Activities of extraterritorial organisations and bodies',
} as const;

export type NaceSection = keyof typeof NACE_SECTIONS;

export function isNaceSection(value: unknown): value is NaceSection {
  return typeof value === 'string' && value.length === 1 && Object.hasOwn(NACE_SECTIONS, value);
}
