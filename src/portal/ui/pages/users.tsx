/** The merchant's users (the owner's page). */
import { t } from '../../../ui/i18n.ts';
import { MerchantUsers } from '../../../ui/merchant-users.tsx';

export function UsersPage() {
  return (
    <>
      <h1>{t('Users')}</h1>
      <MerchantUsers base="" />
    </>
  );
}
