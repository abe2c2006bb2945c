// Testing Library's `render` with the app's query cache around the tree: a fresh cache per
// render, so no test sees another's answers, and the cache's defaults are the app's.

import { QueryClientProvider } from '@tanstack/react-query';
import { render as rtlRender, type RenderOptions } from '@testing-library/react';
import type { ReactElement, ReactNode } from 'react';
import { makeQueryClient } from '../src/api/queries';

/** A fresh query cache, and a wrapper that provides it. */
export function withQueries() {
  const client = makeQueryClient();
  const wrapper = ({ children }: { children: ReactNode }) => <QueryClientProvider client={client}>{children}</QueryClientProvider>;
  return { client, wrapper };
}

export function render(ui: ReactElement, options?: Omit<RenderOptions, 'wrapper'>) {
  return rtlRender(ui, { wrapper: withQueries().wrapper, ...options });
}
