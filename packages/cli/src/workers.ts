/**
 * The messages between `serve`'s primary (supervisor.ts, the Supervisor) and its workers
 * (worker-lifecycle.ts), and the worker's side of them: its slot, whether it is the first of a
 * start, the operations listener's URL (all three in its environment), its answers to the
 * primary's questions and stop requests, and its ready message.
 */
import { describeError } from './errors.js';
import type { MetricsJson } from './metrics.js';

/** Environment the primary gives a worker: its slot (1 to N), whether it is the first of a start, the ops listener's URL. */
export const ENV_SLOT = 'COS_WORKER_SLOT';
export const ENV_FIRST = 'COS_WORKER_FIRST';
export const ENV_OPS = 'COS_WORKER_OPS_URL';

/** What a worker tells the primary once it listens. */
export interface WorkerInfo {
  readonly address: string;
  readonly host: string;
  readonly port: number;
  readonly store: string;
  readonly limiter: string;
  readonly max_connections: number;
  readonly heap_limit_mb: number;
  readonly version: string;
}

export type Question = 'health' | 'metrics';
export type ToWorker = { readonly cos: 'ask'; readonly id: number; readonly what: Question } | { readonly cos: 'stop'; readonly force: boolean; readonly signal?: NodeJS.Signals } | { readonly cos: 'ack' };
export type ToPrimary = { readonly cos: 'ready'; readonly info: WorkerInfo } | { readonly cos: 'answer'; readonly id: number; readonly value: unknown };

/** This worker's slot, 1 to N. */
export function workerSlot(): number {
  return Number(process.env[ENV_SLOT] ?? '1');
}

/** Whether this worker is the first of a start (it alone bootstraps; the others start after it). */
export function firstWorkerOfStart(): boolean {
  return process.env[ENV_FIRST] !== '0';
}

/** The primary's operations listener, for the start-up line; null when OPS_PORT is unset. */
export function workerOpsUrl(): string | null {
  return process.env[ENV_OPS] || null;
}

export interface WorkerAnswers {
  /** null: ready; else why not. */
  health(): Promise<string | null>;
  metrics(): Promise<MetricsJson>;
  /** The primary's stop: the first starts the drain, `force` cuts it short. */
  stop(force: boolean, signal: NodeJS.Signals | undefined): void;
}

let acknowledged: (() => void) | undefined;

/** Answers the primary's questions and stop requests. */
export function onPrimaryMessage(answers: WorkerAnswers): void {
  process.on('message', (message: ToWorker) => {
    if (typeof message !== 'object' || message === null) return;
    if (message.cos === 'stop') answers.stop(message.force, message.signal);
    else if (message.cos === 'ack') acknowledged?.();
    else if (message.cos === 'ask') {
      const work = message.what === 'health' ? answers.health() : answers.metrics();
      work.then(
        (value) => send({ cos: 'answer', id: message.id, value }),
        (e: unknown) => send({ cos: 'answer', id: message.id, value: message.what === 'health' ? describeError(e) : [] }),
      );
    }
  });
}

function send(message: ToPrimary): void {
  if (process.connected) process.send?.(message, undefined, undefined, () => undefined);
}

/**
 * Tells the primary this worker listens, and resolves once the primary has counted it (so /readyz
 * already answers for it when the start-up line appears), or after a second without an answer.
 */
export function tellPrimary(message: { readonly type: 'ready'; readonly info: WorkerInfo }): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, 1_000);
    acknowledged = () => {
      clearTimeout(timer);
      resolve();
    };
    send({ cos: 'ready', info: message.info });
  });
}
