// Bounded waits that say what they waited for: every wait of the e2e goes through `until`
// (or a Playwright wait with a timeout), so a hang fails with a name instead of at the
// runner's limit.

/** Thrown by a probe to stop waiting at once (e.g. the process being waited on exited). */
export class Fatal extends Error {}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Polls `probe` every `every` ms until it returns a truthy value, which it returns; fails after
 * `ms` naming `what` and what the probe last said (its value, or its error's first line).
 */
export async function until<T>(what: string, probe: () => Promise<T | null | undefined | false> | T | null | undefined | false, ms: number, every = 250): Promise<T> {
  const deadline = Date.now() + ms;
  let last: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v) return v;
      last = v;
    } catch (e) {
      if (e instanceof Fatal) throw e;
      last = e instanceof Error ? e.message.split('\n')[0] : e;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${Math.round(ms / 1000)}s waiting for ${what} (last: ${JSON.stringify(last)})`);
    }
    await sleep(every);
  }
}
