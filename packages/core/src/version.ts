/** C-3: the body of GET /v1/version, less service_version which the running build supplies. */
export const API_VERSION_INFO = Object.freeze({
  api_version: 'v1',
  release: 'v1-stable',
  released_on: '2026-06-10',
});

export interface VersionView {
  api_version: string;
  release: string;
  released_on: string;
  service_version: string;
}
