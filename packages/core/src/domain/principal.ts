/** Who is calling: an authenticated API key, or the operator (CLI, full rights). */
export interface KeyPrincipal {
  readonly kind: 'api_key';
  readonly keyId: string;
  readonly keyPrefix: string;
  readonly organisationId: string;
  /** True when the key's organisation has isSystem (a platform key). */
  readonly isPlatform: boolean;
}

export interface OperatorPrincipal {
  readonly kind: 'operator';
}

export type Principal = KeyPrincipal | OperatorPrincipal;

export const OPERATOR: OperatorPrincipal = Object.freeze({ kind: 'operator' });
