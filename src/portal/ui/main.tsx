/** The merchants' portal (placeholder while the pages are written). */
import { render } from 'preact';

render(<p>Merchant portal</p>, document.getElementById('app')!);
