import { wellFormedText } from './text.js';

/** Who is calling: an authenticated API key, or the operator (CLI, full rights). */
export interface KeyPrincipal {
  readonly kind: 'api_key';
  readonly keyId: string;
  readonly keyPrefix: string;
  readonly organisationId: string;
  /** True when the key's organisation has isSystem (a platform key). */
  readonly isPlatform: boolean;
  /** The key's scopes (C-60), sorted: what it may do, read from the key record (they never change). */
  readonly scopes: readonly string[];
  /**
   * The networks requests with the key may come from (C-262), null or absent: any address. Checked
   * once per request after admission (networkRefusal).
   */
  readonly allowedCidrs?: readonly string[] | null;
}

export interface OperatorPrincipal {
  readonly kind: 'operator';
  /** Who the operator is (the CLI's `--actor`, default the OS user name); recorded in audit entries. */
  readonly name?: string;
}

export type Principal = KeyPrincipal | OperatorPrincipal;

export const OPERATOR: OperatorPrincipal = Object.freeze({ kind: 'operator' });

/**
 * The operator under a name, recorded as the actor of what it does: well-formed (C-121), since the
 * name is hashed into the audit chain and must hash as it is stored.
 */
export function namedOperator(name: string): OperatorPrincipal {
  return Object.freeze({ kind: 'operator', name: wellFormedText(name) });
}
