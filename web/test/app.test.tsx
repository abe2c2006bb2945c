// The app's session: without one only the login form shows; a login starts from an empty
// query cache, so nothing read in an earlier session shows in the new one.

import { QueryClientProvider } from '@tanstack/react-query';
import { act, cleanup, fireEvent, render, screen } from '@testing-library/react';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { App } from '../src/App';
import { makeQueryClient } from '../src/api/queries';

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
});

describe('App', () => {
  it('a login starts from an empty cache', async () => {
    const reply = (status: number, body: unknown) => Promise.resolve(new Response(JSON.stringify(body), { status }));
    vi.stubGlobal(
      'fetch',
      vi.fn((url: string) => {
        if (url === '/auth/me') return reply(401, { error: { code: 'unauthorized', message: 'log in' } });
        if (url === '/auth/login') return reply(200, { user: 'ada', csrf: 'c' });
        if (url === '/api/clusters') return reply(200, []);
        return reply(404, { error: { code: 'not_found', message: url } });
      }),
    );
    const queries = makeQueryClient();
    // What an earlier session read.
    queries.setQueryData(['cluster', 'east', 'tokens'], [{ name: 'admin', role: 'admin', created_unix: 0, created_by: 'generated' }]);
    render(
      <QueryClientProvider client={queries}>
        <App />
      </QueryClientProvider>,
    );
    await screen.findByTestId('login-form');
    expect(queries.getQueryData(['cluster', 'east', 'tokens'])).toBeDefined();
    fireEvent.change(screen.getByTestId('login-password'), { target: { value: 'pw' } });
    await act(async () => fireEvent.click(screen.getByTestId('login-submit')));
    expect((await screen.findByTestId('current-user')).textContent).toBe('ada');
    expect(queries.getQueryData(['cluster', 'east', 'tokens'])).toBeUndefined();
  });
});
