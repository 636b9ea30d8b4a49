/**
 * What the console's and the portal's pages are built on: the route of the URL's fragment
 * (`#/orders/ord_...`), and the app itself: the session asked for at start, the sign-in form while
 * there is none, the pages once signed in, signing out.
 */
import { type ComponentChildren, render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { ApiError, del, get, onSignedOut, rememberSession } from './api.ts';
import { ErrorNote, LanguageSwitch, SessionContext } from './components.tsx';
import { ZONE, ZONE_LABEL } from './format.ts';
import { t } from './i18n.ts';

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

/** A page of the side menu: shown when the session's permissions include `permission` (null: always). */
export interface NavItem {
  href: string;
  label: () => string;
  permission: string | null;
}

/**
 * The signed-in frame of both surfaces: the top bar (menu button on a phone, the brand, the zone
 * every time is shown in, who is signed in, the language switch, sign out), the side menu of what
 * the session may see (the current page marked), and the page.
 */
export function Shell(o: {
  session: { permissions: string[] };
  brand: string;
  who: ComponentChildren;
  nav: NavItem[];
  /** The menu entry of the current route (`#/` + its first segment, unless said otherwise). */
  active: string;
  onSignOut: () => void;
  children: ComponentChildren;
}) {
  const [menu, setMenu] = useState(false);
  return (
    <SessionContext.Provider value={o.session}>
      <div class="shell">
        <header class="top">
          <button type="button" class="menu-toggle" aria-expanded={menu} onClick={() => setMenu(!menu)}>
            {t('Menu')}
          </button>
          <strong class="brand">{o.brand}</strong>
          <span class="zone" title={ZONE}>
            {t('Times: {zone} ({label})', { zone: ZONE, label: ZONE_LABEL })}
          </span>
          {o.who}
          <LanguageSwitch />
          <button type="button" onClick={o.onSignOut}>
            {t('Sign out')}
          </button>
        </header>
        <nav class={menu ? 'side open' : 'side'} aria-label={t('Pages')} onClick={() => setMenu(false)}>
          {o.nav
            .filter((n) => n.permission === null || o.session.permissions.includes(n.permission))
            .map((n) => (
              <a key={n.href} href={n.href} aria-current={n.href === o.active ? 'page' : undefined}>
                {n.label()}
              </a>
            ))}
        </nav>
        <main class="content">{o.children}</main>
      </div>
    </SessionContext.Provider>
  );
}
