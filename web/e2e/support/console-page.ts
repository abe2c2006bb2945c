// The console as the e2e sees it: one logged-in page (its session shared with `get`, the API
// calls the steps check the views against), its elements by test id, and a screenshot of
// each view, taken only once the view shows no error the API's shapes would explain.

import fs from 'node:fs';
import path from 'node:path';
import { expect, type Page } from '@playwright/test';
import { SHOTS } from './paths';

const T0 = Date.now();

/** A line of the e2e's own log, with the seconds since it started. */
export const log = (...a: unknown[]) => console.log(`[e2e +${((Date.now() - T0) / 1000).toFixed(1)}s]`, ...a);

export class ConsolePage {
  /** Uncaught errors in the page, checked at the end. */
  readonly errors: string[] = [];

  constructor(
    readonly page: Page,
    /** The console's URL, without a trailing slash. */
    readonly base: string,
  ) {
    page.on('pageerror', (e) => this.errors.push(e.message));
  }

  /** The element with test id `id` (a property, so that steps can take it apart). */
  readonly tid = (id: string) => this.page.getByTestId(id);

  /** The trimmed text of the element with test id `id`. */
  readonly text = async (id: string): Promise<string> => (await this.tid(id).textContent())?.trim() ?? '';

  /**
   * Clicks the element with test id `id` and waits for a new "ok" notice containing `notice`.
   * Notices stay five seconds, so one of the same text left by an earlier step is dismissed
   * first: it cannot stand in for this click's answer.
   */
  async clickForNotice(id: string, notice: string, timeout = 60_000): Promise<void> {
    const same = this.tid('notice-ok').filter({ hasText: notice });
    for (let i = 0; i < 10 && (await same.count()) > 0; i++) {
      // It may leave by itself meanwhile: a click that finds nothing is not an error.
      await same.first().getByRole('button', { name: 'dismiss' }).click({ timeout: 1_000 }).catch(() => {});
    }
    expect(await same.count(), `old "${notice}" notices dismissed`).toBe(0);
    await this.tid(id).click();
    await same.first().waitFor({ timeout });
  }

  /** Where the console relays cluster `name`'s dashboard API. */
  clusterApi(name: string): string {
    return `${this.base}/api/clusters/${encodeURIComponent(name)}`;
  }

  /** GET `url` (absolute, or a path of the console) with the page's session; its JSON. */
  async get<T>(url: string): Promise<T> {
    const r = await this.page.request.get(url.startsWith('http') ? url : `${this.base}${url}`);
    expect(r.ok(), `GET ${url} answered ${r.status()}`).toBe(true);
    return (await r.json()) as T;
  }

  /**
   * A full-page screenshot of the view as `name`.png. An answer of a shape the console does
   * not know shows as a `bad_answer` error: none may be on screen.
   */
  async shot(name: string): Promise<void> {
    await expect(this.page.getByText('bad_answer'), `the ${name} view shows an answer it cannot read`).toHaveCount(0);
    // Every field of every view has a name a screen reader can say: a <label> or aria-label.
    const unlabelled = await this.page.locator('input, select, textarea').evaluateAll((els) =>
      els
        .filter((e) => {
          const f = e as HTMLInputElement;
          return !(f.labels && f.labels.length > 0) && !f.getAttribute('aria-label') && !f.getAttribute('aria-labelledby');
        })
        .map((e) => e.getAttribute('data-testid') ?? e.outerHTML.slice(0, 80)),
    );
    expect(unlabelled, `fields without a label in the ${name} view`).toEqual([]);
    fs.mkdirSync(SHOTS, { recursive: true });
    await this.page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
    log(`screenshot ${name}.png`);
  }
}
