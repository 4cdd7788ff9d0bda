/**
 * The secret-scanning programme's public keys, from the file SECRET_SCANNING_PUBLIC_KEYS names (the
 * service never fetches them over the network). Read at start, where a file that does not parse
 * stops `serve` with one line naming the variable, and again on SIGHUP, where a bad file keeps the
 * keys in use and says why (key rotation without a restart).
 */
import { readFileSync } from 'node:fs';
import { parseScannerKeys, type ScannerKeySet } from '@cos/core';
import { ConfigError } from './config.js';

export class ScannerKeyFile {
  #keys: ScannerKeySet;

  private constructor(
    readonly path: string,
    keys: ScannerKeySet,
  ) {
    this.#keys = keys;
  }

  /** Reads and parses the file; throws ConfigError naming SECRET_SCANNING_PUBLIC_KEYS. */
  static load(path: string): ScannerKeyFile {
    return new ScannerKeyFile(path, ScannerKeyFile.read(path));
  }

  private static read(path: string): ScannerKeySet {
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch (e) {
      throw new ConfigError(`SECRET_SCANNING_PUBLIC_KEYS: cannot read ${path} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
    }
    try {
      return parseScannerKeys(text);
    } catch (e) {
      throw new ConfigError(`SECRET_SCANNING_PUBLIC_KEYS: ${path} ${(e as Error).message}`);
    }
  }

  /** The keys in use. */
  keys(): ScannerKeySet {
    return this.#keys;
  }

  /** Reads the file again: the new keys on success; on failure the old keys stay and it throws ConfigError. */
  reload(): ScannerKeySet {
    this.#keys = ScannerKeyFile.read(this.path);
    return this.#keys;
  }
}
