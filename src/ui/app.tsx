/**
 * What the console's and the portal's pages are built on: the route of the URL's fragment
 * (`#/orders/ord_...`), and the app itself: the session asked for at start, the sign-in form while
 * there is none, the pages once signed in, signing out.
 */
import { type ComponentChildren, render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { ApiError, del, get, onSignedOut, rememberSession } from './api.ts';
import { ErrorNote } from './components.tsx';

function currentRoute(): string[] {
  const h = window.location.hash.replace(/^#\/?/, '');
  return h.split('?')[0]!.split('/').filter(Boolean).map(decodeURIComponent);
}

/** The fragment's route, as path segments, followed as it changes. */
export function useRoute(): string[] {
  const [route, setRoute] = useState(currentRoute);
  useEffect(() => {
    const on = () => setRoute(currentRoute());
    window.addEventListener('hashchange', on);
    return () => window.removeEventListener('hashchange', on);
  }, []);
  return route;
}

interface AppProps<S> {
  /** The session endpoint: GET answers the session (401 without one), DELETE signs out. */
  sessionPath: string;
  boot: string;
  signIn: (onSignedIn: (s: S) => void) => ComponentChildren;
  shell: (session: S, onSignOut: () => void) => ComponentChildren;
}

/** The session's app: sign-in, the pages, sign-out. */
export function SessionApp<S extends { csrfToken: string }>({ sessionPath, boot, signIn, shell }: AppProps<S>) {
  const [session, setSession] = useState<S | null | undefined>(undefined);
  const [error, setError] = useState<unknown>(null);
  const enter = (s: S | null) => {
    rememberSession(s);
    setSession(s);
  };
  useEffect(() => {
    onSignedOut(() => enter(null));
    get<S>(sessionPath).then(enter, (err: unknown) => {
      if (err instanceof ApiError && err.status === 401) setSession(null);
      else setError(err);
    });
  }, []);
  if (error) return <ErrorNote error={error} />;
  if (session === undefined) return <p class="boot">{boot}</p>;
  if (session === null) return <>{signIn(enter)}</>;
  return (
    <>
      {shell(session, () => {
        void del(sessionPath)
          .catch(() => {})
          .finally(() => {
            enter(null);
            window.location.hash = '#/';
          });
      })}
    </>
  );
}

/** Draws a page's app in its `#app` (the boot text the page carries replaced, not kept above the app). */
export function startPage(app: ComponentChildren): void {
  const root = document.getElementById('app')!;
  root.replaceChildren();
  render(app, root);
}

/** Draws the session's app (SessionApp) as the page. */
export function startApp<S extends { csrfToken: string }>(props: AppProps<S>): void {
  startPage(<SessionApp<S> {...props} />);
}
