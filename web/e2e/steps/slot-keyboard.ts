// The slot grid from the keyboard only: Tab reaches it, arrows move the focus (each cell read
// as "slot N, group G"), Enter selects, shift+arrows extend the range, Escape clears. Nothing
// is changed on the cluster.

import { expect } from '@playwright/test';
import { log, type ConsolePage } from '../support/console-page';

export async function slotKeyboardStep(con: ConsolePage): Promise<void> {
  const { tid, page } = con;
  const grid = tid('slot-grid');
  await grid.waitFor();
  // From the top of the page, Tab until the grid has the focus (bounded: the page has a few
  // dozen focusable elements before it at most).
  await page.locator('body').press('Escape');
  await page.evaluate(() => (document.activeElement as HTMLElement | null)?.blur());
  let reached = false;
  for (let i = 0; i < 80 && !reached; i++) {
    await page.keyboard.press('Tab');
    reached = await page.evaluate(() => document.activeElement?.getAttribute('data-testid') === 'slot-grid');
  }
  expect(reached, 'Tab reaches the slot grid').toBe(true);
  const active = async () => {
    const id = await grid.getAttribute('aria-activedescendant');
    return id ? page.locator(`#${id}`) : null;
  };
  await page.keyboard.press('Home');
  await page.keyboard.press('ArrowDown');
  await page.keyboard.press('ArrowRight');
  await page.keyboard.press('ArrowRight');
  const cell = await active();
  expect(cell, 'the grid names its focused cell').not.toBeNull();
  const first = Number(await cell?.getAttribute('data-slot'));
  expect(first % 32, 'the focus is in the third column').toBe(2);
  const label = (await cell?.getAttribute('aria-label')) ?? '';
  expect(label, 'the cell reads its slot and group').toMatch(new RegExp(`^slot ${first}, (group \\d+|unassigned)`));
  await page.keyboard.press('Enter');
  await page.keyboard.press('Shift+ArrowRight');
  await page.keyboard.press('Shift+ArrowRight');
  await page.keyboard.press('Shift+ArrowRight');
  expect(await tid('selection-range').inputValue(), 'the range selected from the keyboard').toBe(`${first}-${first + 3}`);
  expect(await tid(`slot-${first + 3}`).getAttribute('aria-selected')).toBe('true');
  await con.shot('07b-slotmap-keyboard');
  await page.keyboard.press('Escape');
  expect(await tid('selection-range').inputValue(), 'Escape clears the selection').toBe('');
  log(`slot grid from the keyboard: ${label}; selected ${first}-${first + 3} and cleared`);
}
