// xdst's log: the core ABI's one optional import. xdst tags each line with the plugin's name
// and limits how much a plugin may write.

@external("xdst", "log")
declare function xdst_log(level: i32, ptr: usize, len: usize): void;

export const DEBUG = 0;
export const INFO = 1;
export const WARN = 2;
export const ERROR = 3;

/** Writes `message` to xdst's log at `level` (DEBUG, INFO, WARN or ERROR). */
export function log(level: i32, message: string): void {
  const bytes = String.UTF8.encode(message);
  xdst_log(level, changetype<usize>(bytes), <usize>bytes.byteLength);
}
