/* Symbol visibility for npurt. The library is built with hidden visibility;
 * only functions marked NPURT_API are exported. */
#ifndef NPURT_EXPORT_H_
#define NPURT_EXPORT_H_

#if defined(NPURT_BUILDING_LIBRARY)
#define NPURT_API __attribute__((visibility("default")))
#else
#define NPURT_API
#endif

#endif /* NPURT_EXPORT_H_ */
