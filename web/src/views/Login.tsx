// The login form (POST /auth/login): shown whenever there is no session.

import { useState, type FormEvent } from 'react';
import { api } from '../api/client';
import { ErrorBox } from '../components/ui';

export function Login({ onLogin }: { onLogin: (user: string) => void }) {
  const [user, setUser] = useState('admin');
  const [password, setPassword] = useState('');
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const r = await api.login(user, password);
      onLogin(r.user);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };

  return (
    <div className="login-page">
      <form className="login-form" onSubmit={submit} data-testid="login-form">
        <h1>Tessera console</h1>
        <label>
          User
          <input value={user} onChange={(e) => setUser(e.target.value)} autoComplete="username" data-testid="login-user" />
        </label>
        <label>
          Password
          <input
            type="password"
            value={password}
            onChange={(e) => setPassword(e.target.value)}
            autoComplete="current-password"
            autoFocus
            data-testid="login-password"
          />
        </label>
        <ErrorBox error={error} testid="login-error" />
        <button type="submit" className="primary" disabled={busy || !user || !password} data-testid="login-submit">
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
      </form>
    </div>
  );
}
