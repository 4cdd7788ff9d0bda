/** Process-wide state of the running command. */
export const lifecycle = {
  /** True once `serve` is listening: the process then lives until a signal. */
  daemon: false,
};
