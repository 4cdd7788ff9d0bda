/**
 * The secret-scanning programme's public keys: from the file SECRET_SCANNING_PUBLIC_KEYS names, read
 * at start (a file that does not parse stops `serve` with one line naming the variable) and again on
 * SIGHUP (a bad file keeps the keys in use and says why), and/or from the list the programme
 * publishes at SECRET_SCANNING_KEYS_URL (ScannerKeyUrl below). Keys from both are accepted.
 */
import { readFileSync } from 'node:fs';
import { combineScannerKeys, EMPTY_SCANNER_KEYS, parseScannerKeys, type Logger, type ScannerKeySet } from '@cos/core';
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

/** Fewest milliseconds between two fetches an unknown key identifier triggers. */
export const UNKNOWN_KEY_FETCH_INTERVAL_MS = 60_000;
/** Bound on one fetch of the key list (connection, answer and body). */
const KEY_LIST_FETCH_TIMEOUT_MS = 10_000;
/** The largest key list accepted (the programme's list is a few kilobytes). */
const MAX_KEY_LIST_BYTES = 1024 * 1024;

export interface ScannerKeyUrlOptions {
  readonly url: string;
  /** SECRET_SCANNING_KEYS_REFRESH. */
  readonly refreshMs: number;
  readonly logger: Logger;
  /** Milliseconds now (tests pass a fake). */
  readonly now?: () => number;
  readonly fetch?: typeof fetch;
}

/**
 * The programme's published key list (SECRET_SCANNING_KEYS_URL): fetched by `start()` (at start-up),
 * every `refreshMs`, and by `refreshFor` when an alert names a key identifier the list lacks, at most
 * once per UNKNOWN_KEY_FETCH_INTERVAL_MS (concurrent callers share one fetch). A fetch that fails
 * (network, status other than 200, a list that does not parse) keeps the last good list; the first
 * failure after a success (or at start) is logged at error, later ones of the same streak are not,
 * and the next success is logged at info.
 */
export class ScannerKeyUrl {
  #keys: ScannerKeySet = EMPTY_SCANNER_KEYS;
  #failing = false;
  #inFlight: Promise<boolean> | null = null;
  #lastUnknownFetch = Number.NEGATIVE_INFINITY;
  #timer: NodeJS.Timeout | null = null;
  readonly #now: () => number;
  readonly #fetch: typeof fetch;

  constructor(private readonly options: ScannerKeyUrlOptions) {
    this.#now = options.now ?? Date.now;
    this.#fetch = options.fetch ?? fetch;
  }

  /** The last good list (empty until a fetch succeeds). */
  keys(): ScannerKeySet {
    return this.#keys;
  }

  /** Fetches now and then every refreshMs (the timer does not keep the process alive). */
  async start(): Promise<boolean> {
    const ok = await this.fetchNow();
    this.#timer ??= setInterval(() => void this.fetchNow(), this.options.refreshMs);
    this.#timer.unref();
    return ok;
  }

  stop(): void {
    if (this.#timer !== null) clearInterval(this.#timer);
    this.#timer = null;
  }

  /** An alert named `identifier`, which the list lacks: fetch again unless one was made within the interval. */
  async refreshFor(identifier: string): Promise<void> {
    if (this.#keys.has?.(identifier) === true) return;
    if (this.#inFlight === null && this.#now() - this.#lastUnknownFetch < UNKNOWN_KEY_FETCH_INTERVAL_MS) return;
    this.#lastUnknownFetch = this.#now();
    await this.fetchNow();
  }

  /** One fetch (or the one in flight); true when the list was replaced. */
  fetchNow(): Promise<boolean> {
    this.#inFlight ??= this.#fetchOnce().finally(() => {
      this.#inFlight = null;
    });
    return this.#inFlight;
  }

  async #fetchOnce(): Promise<boolean> {
    try {
      const res = await this.#fetch(this.options.url, { redirect: 'error', signal: AbortSignal.timeout(KEY_LIST_FETCH_TIMEOUT_MS) });
      if (res.status !== 200) throw new Error(`answered ${res.status}`);
      const text = await res.text();
      if (Buffer.byteLength(text) > MAX_KEY_LIST_BYTES) throw new Error('the list is larger than 1 MiB');
      const keys = parseScannerKeys(text);
      this.#keys = keys;
      if (this.#failing) this.options.logger.info({ url: this.options.url, keys: keys.size }, 'secret-scanning key list fetched again');
      this.#failing = false;
      return true;
    } catch (e) {
      if (!this.#failing) {
        this.options.logger.error(
          { url: this.options.url, err: { message: (e as Error).message }, keys: this.#keys.size },
          'secret-scanning key list not fetched; the last good list stays in use (logged once until a fetch succeeds)',
        );
      }
      this.#failing = true;
      return false;
    }
  }
}

/** The keys of the file and of the URL together (either may be absent), and the URL's refresh. */
export function scannerKeySource(file: ScannerKeyFile | null, url: ScannerKeyUrl | null): { keys(): ScannerKeySet; refreshFor?(identifier: string): Promise<void> } | null {
  if (file === null && url === null) return null;
  const keys = (): ScannerKeySet => combineScannerKeys([...(file !== null ? [file.keys()] : []), ...(url !== null ? [url.keys()] : [])]);
  return url === null ? { keys } : { keys, refreshFor: (identifier) => url.refreshFor(identifier) };
}
