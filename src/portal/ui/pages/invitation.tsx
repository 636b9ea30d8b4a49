/** An invitation link: the invited user chooses its password, then signs in (`#/password-set/{login}`). */
import { get, post } from '../../../ui/api.ts';
import { ActionNote, Field, LanguageSwitch, Loading, formValues, useAction, useLoad } from '../../../ui/components.tsx';
import { t } from '../../../ui/i18n.ts';
import type { Invitation } from '../rows.ts';

export function InvitationPage({ token }: { token: string }) {
  const loaded = useLoad(() => get<Invitation>(`/invitations/${encodeURIComponent(token)}`), [token]);
  const accept = useAction();
  return (
    <main class="sign-in">
      <div class="card">
        <h1>{t('Merchant portal')}</h1>
        <Loading loaded={loaded}>
          {(inv) => (
            <form
              aria-label={t('Accept the invitation')}
              onSubmit={(e) => {
                const v = formValues(e);
                void accept.run(async () => {
                  if (v.password !== v.again) throw new Error(t('The two passwords differ.'));
                  await post(`/invitations/${encodeURIComponent(token)}/accept`, { password: v.password });
                  // The sign-in form, saying the password is set, its login filled in.
                  window.location.hash = `#/password-set/${encodeURIComponent(inv.login)}`;
                });
              }}
            >
              <p>
                {t('You are invited to the portal of {merchant} as {login}. Choose your password.', {
                  merchant: inv.merchantName,
                  login: inv.login,
                })}
              </p>
              <input type="hidden" name="login" autocomplete="username" value={inv.login} />
              <Field label={t('Password')} hint={t('12 to 256 characters')}>
                <input name="password" type="password" autocomplete="new-password" required minLength={12} maxLength={256} />
              </Field>
              <Field label={t('The same password again')}>
                <input name="again" type="password" autocomplete="new-password" required minLength={12} maxLength={256} />
              </Field>
              <button type="submit" class="primary" disabled={accept.busy}>
                {t('Set my password')}
              </button>
              <ActionNote action={accept} />
            </form>
          )}
        </Loading>
        <LanguageSwitch />
      </div>
    </main>
  );
}
